use super::*;

#[test]
fn table_and_enum_agree() {
    for (i, spec) in METHODS.iter().enumerate() {
        assert_eq!(spec.method as usize, i);
        assert_eq!(Method::from_name(spec.name), Some(spec.method));
    }
    let mut names: Vec<_> = METHODS.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), METHODS.len(), "duplicate wire name");
}

#[test]
fn drive_methods_are_exactly_the_mutating_session_ones() {
    let drive: Vec<_> = METHODS
        .iter()
        .filter(|s| s.least_role == Role::Drive)
        .map(|s| s.name)
        .collect();
    assert_eq!(
        drive,
        [
            "session.submit",
            "session.abort",
            "session.permission.respond",
            "sessions.start"
        ]
    );
}

#[test]
fn params_decode_null_as_omitted_and_ignore_unknown_fields() {
    let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
    let p =
        parse_params::<def::SessionAbort>("r", map(serde_json::json!({"turn_id": null}))).unwrap();
    assert_eq!(p.turn_id, None);
    let p = parse_params::<def::SessionSubmit>(
        "r",
        map(serde_json::json!({"prompt": "hi", "driver": {"driver_id": "me"}})),
    )
    .unwrap();
    assert_eq!(p.prompt, "hi");
    let err =
        parse_params::<def::SessionSubmit>("r", map(serde_json::json!({"prompt": 5}))).unwrap_err();
    assert_eq!(
        err.kind,
        super::super::envelope::RejectionKind::InvalidParams
    );
    assert!(
        parse_params::<def::SessionHistory>("r", map(serde_json::json!({"limit": -1}))).is_err()
    );
}

#[test]
fn result_validation_refuses_wrong_shapes() {
    assert!(validate_result::<def::SessionsStart>(serde_json::json!({"session_id": "s"})).is_ok());
    assert!(validate_result::<def::SessionsStart>(serde_json::json!({"session": 1})).is_err());
}

#[test]
fn only_sessions_start_and_switch_rebind_the_session() {
    let rebinding: Vec<_> = METHODS
        .iter()
        .filter(|s| s.rebinds_session)
        .map(|s| s.name)
        .collect();
    assert_eq!(rebinding, ["sessions.start", "sessions.switch"]);
}
