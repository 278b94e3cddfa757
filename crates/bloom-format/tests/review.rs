//! Reviewable renderings of the format: any change to the bytes shows up as an insta diff.

mod common;

#[test]
fn header_dump_of_a_small_snapshot() {
    insta::assert_snapshot!("small_header", common::small().dump_header());
}

#[test]
fn hex_dump_of_a_small_snapshot() {
    insta::assert_snapshot!(
        "small_hex",
        bloom_format::hex_dump(&common::small().encode())
    );
}

#[test]
fn header_dump_of_the_seed_layout() {
    let seed = bloom_format::import_seed_raw(&[0; 128]).unwrap();
    insta::assert_snapshot!("seed_raw_header", seed.dump_header());
}

#[test]
fn header_dump_of_a_version_1_file_shows_its_own_fields() {
    let bytes = common::v1_fixture("salted-trim-lower");
    let snapshot =
        bloom_format::Snapshot::decode(bytes, &bloom_format::DecodeOptions::unlimited()).unwrap();
    insta::assert_snapshot!("v1_salted_trim_lower_header", snapshot.dump_header());
}
