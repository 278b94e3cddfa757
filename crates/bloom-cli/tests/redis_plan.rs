//! `bloom redis add` against the plan a filter was created with, as the local `add` does: a
//! warning past it, `--strict` refusing to go past it; and what `add` and `delete` say.

mod common;

use bloom_testing::redis::RedisServer;
use common::{bloom, run};

fn key_file(dir: &std::path::Path, name: &str, range: std::ops::Range<u32>) -> String {
    let path = dir.join(name);
    let text: String = range.map(|i| format!("k-{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn redis_add_warns_past_the_plan_and_strict_stops_at_it() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &'static str| {
        [
            "--url".to_owned(),
            url.clone(),
            "--name".into(),
            name.into(),
        ]
    };
    let create = |name: &'static str| {
        let (code, _, err) = run(bloom()
            .args(["redis", "create", "--items", "1000", "--fpr", "0.01"])
            .args(at(name)));
        assert_eq!(code, 0, "{err}");
    };

    // Twice the plan, without --strict: every key in, a warning naming the plan.
    create("loose");
    let twice = key_file(dir.path(), "twice.txt", 0..2000);
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--keys", &twice])
        .args(at("loose")));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("added 2000 keys ("), "{err}");
    assert!(err.contains("to redis filter loose"), "{err}");
    assert!(
        err.contains("warning: redis filter loose is over its plan"),
        "{err}"
    );
    assert!(err.contains("for a capacity of 1000"), "{err}");

    // With --strict: the add stops once the plan is full, and says how far it went.
    create("strict");
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--strict", "--keys", &twice])
        .args(at("strict")));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("reached its plan of 1000 items"), "{err}");
    assert!(err.contains("were not added"), "{err}");
    let check = |name: &'static str, key: &str| {
        let (_, out, _) = run(bloom().args(["redis", "check", key]).args(at(name)));
        out.split('\t').next().unwrap_or("").to_owned()
    };
    assert_eq!(check("strict", "k-0"), "maybe");
    // Past the plan, nothing went in (a key well past it answers absent, almost surely: the
    // filter is at 1 % for 1,000 keys, and these are a hundred of them).
    let past: usize = (1900..2000)
        .filter(|i| check("strict", &format!("k-{i}")) == "maybe")
        .count();
    assert!(past < 10, "{past} of 100 keys past the plan answer maybe");
    // A filter already past its plan takes nothing more with --strict.
    let more = key_file(dir.path(), "more.txt", 5000..5010);
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--strict", "--keys", &more])
        .args(at("loose")));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("over its plan already"), "{err}");
    assert!(err.contains("nothing was added"), "{err}");
    assert_eq!(check("loose", "k-5003"), "absent");

    // Within the plan: no warning.
    create("calm");
    let few = key_file(dir.path(), "few.txt", 0..100);
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--strict", "--keys", &few])
        .args(at("calm")));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(
        err.contains("added 100 keys (100 new) to redis filter calm"),
        "{err}"
    );
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--keys", &few])
        .args(at("calm")));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("added 100 keys (0 new)"), "{err}");
}

#[test]
fn redis_delete_says_what_it_deleted() {
    let server = RedisServer::start();
    let url = server.url();
    let at = ["--url", url.as_str(), "--name", "gone"];
    let (code, _, err) = run(bloom()
        .args([
            "redis", "create", "--bits", "65536", "--hashes", "7", "--shards", "4",
        ])
        .args(at));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(bloom().args(["redis", "delete"]).args(at));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("deleted redis filter gone: its metadata (bloom:{gone}:meta), 4 shards and their epoch records"),
        "{err}"
    );
    assert_eq!(server.cli(&["EXISTS", "bloom:{gone}:meta"]).trim(), "0");
    let (code, _, err) = run(bloom().args(["redis", "delete"]).args(at));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing deleted"), "{err}");
}
