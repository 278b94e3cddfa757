//! Tells the crate which Python it is built for (`Py_3_14`, `PyPy`, ...): `text.rs` reads a
//! `str`'s characters in place only where CPython's layout is the one it knows.

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
