//! What an operator's subscriber and exporter would see, kept for a test to assert on: the
//! `tracing` events of a closure, and a Prometheus scrape of the metrics it recorded.

use std::sync::{Arc, Mutex};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// One event as a subscriber saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its level.
    pub level: tracing::Level,
    /// Its message.
    pub message: String,
    /// Its other fields, as `Debug` (or `Display` for strings) shows them.
    pub fields: Vec<(String, String)>,
}

impl Seen {
    /// The field `name`, if the event has it.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A subscriber layer that keeps every event.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Seen>>>);

impl Events {
    fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
}

struct Fields<'a>(&'a mut Seen);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let value = format!("{value:?}");
        if field.name() == "message" {
            self.0.message = value;
        } else {
            self.0.fields.push((field.name().to_owned(), value));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.message = value.to_owned();
        } else {
            self.0
                .fields
                .push((field.name().to_owned(), value.to_owned()));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut seen = Seen {
            level: *event.metadata().level(),
            message: String::new(),
            fields: Vec::new(),
        };
        event.record(&mut Fields(&mut seen));
        self.0.lock().unwrap().push(seen);
    }
}

/// Runs `work` with a Prometheus recorder and an event-keeping subscriber installed for this
/// thread; returns what it returned, the scrape, and the events.
pub fn observed<T>(work: impl FnOnce() -> T) -> (T, Scrape, Vec<Seen>) {
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    let handle: PrometheusHandle = recorder.handle();
    let events = Events::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    let out = tracing::subscriber::with_default(subscriber, || {
        metrics::with_local_recorder(&recorder, work)
    });
    (out, Scrape(handle.render()), events.all())
}

/// A Prometheus text scrape.
pub struct Scrape(pub String);

impl Scrape {
    /// The value of `name` with exactly the labels `labels` (as `k="v"` pairs, in order).
    #[must_use]
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        let series = if labels.is_empty() {
            name.to_owned()
        } else {
            format!("{name}{{{}}}", labels.join(","))
        };
        self.0.lines().find_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            (key == series).then(|| value.parse().ok()).flatten()
        })
    }

    /// The value of `name` for the filter `filter` (its only label); a missing series fails
    /// the test with the scrape.
    #[must_use]
    pub fn of(&self, filter: &str, name: &str) -> f64 {
        self.value(name, &[("filter", filter)]).unwrap_or_else(|| {
            panic!(
                "{name}{{filter={filter:?}}} is not in the scrape:\n{}",
                self.0
            )
        })
    }
}
