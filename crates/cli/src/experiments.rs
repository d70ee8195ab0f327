//! The experiments this build can run, for `nudma list`.

/// `(id, description)` of every implemented experiment.
pub fn catalog() -> Vec<(&'static str, &'static str)> {
    let mut v = vec![(
        "engine.phold",
        "PHOLD benchmark of the discrete-event engine (run by `nudma bench phold`)",
    )];
    v.extend(
        studies::catalog::implemented()
            .into_iter()
            .map(|e| (e.info.id, e.info.description)),
    );
    v
}
