//! The experiments this build can run, for `nudma list`. Grows as studies land.

/// `(id, description)` of every implemented experiment.
pub fn catalog() -> Vec<(&'static str, &'static str)> {
    vec![(
        "engine.phold",
        "PHOLD benchmark of the discrete-event engine (run by `nudma bench phold`)",
    )]
}
