//! The configuration as a whole: defaults, bad values, unknown variables, selection.

use super::*;

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn error(vars: &[(&str, &str)]) -> String {
    config(vars)
        .expect_err("the configuration should be refused")
        .to_string()
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let c = config(&[("HOME", "/root")]).unwrap();
    assert_eq!(c.secret_name.as_str(), "aws-ecr-token");
    assert_eq!(c.selection.include, Include::All);
    assert!(c.registries.is_empty());
    assert!(!c.dry_run);
    assert_eq!(c.concurrency, 16);
    assert_eq!(c.timeout, Duration::from_secs(300));
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(
        c.termination_log, None,
        "the kubelet's default, in a pod only"
    );
    assert_eq!(c.renew_before, Duration::from_secs(12 * 3600));
    assert_eq!(c.pushgateway, None);
    assert!(c.events);
    assert_eq!(c.assume_role, None);
}

#[test]
fn assume_role_takes_a_role_arn_an_external_id_and_a_session_name() {
    const ARN: &str = "arn:aws:iam::210987654321:role/ecr-reader";
    let c = config(&[("ECR_REFRESH_ASSUME_ROLE_ARN", ARN)]).unwrap();
    let role = c.assume_role.expect("a role to assume");
    assert_eq!(role.role_arn.as_str(), ARN);
    assert_eq!(role.external_id, None);
    assert_eq!(role.session_name.as_str(), "ecr-refresh");

    let c = config(&[
        ("ECR_REFRESH_ASSUME_ROLE_ARN", ARN),
        ("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", "tenant-42"),
        ("ECR_REFRESH_ASSUME_ROLE_SESSION_NAME", "cluster-eu-1"),
    ])
    .unwrap();
    let role = c.assume_role.expect("a role to assume");
    assert_eq!(
        role.external_id.as_ref().map(|i| i.as_str()),
        Some("tenant-42")
    );
    assert_eq!(role.session_name.as_str(), "cluster-eu-1");
}

#[test]
fn a_session_name_alone_is_accepted_and_assumes_nothing() {
    let c = config(&[("ECR_REFRESH_ASSUME_ROLE_SESSION_NAME", "ecr-refresh")]).unwrap();
    assert_eq!(c.assume_role, None);
    let message = error(&[("ECR_REFRESH_ASSUME_ROLE_SESSION_NAME", "x")]);
    assert!(message.contains("must be 2 to 64"), "{message}");
}

#[test]
fn half_set_or_malformed_assume_role_values_are_refused_naming_the_variable() {
    for (vars, starts) in [
        (
            vec![("ECR_REFRESH_ASSUME_ROLE_ARN", "arn:aws:iam::123:role/x")],
            "ECR_REFRESH_ASSUME_ROLE_ARN=\"arn:aws:iam::123:role/x\" is invalid: must be an IAM role ARN",
        ),
        (
            vec![("ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID", "tenant-42")],
            "ECR_REFRESH_ASSUME_ROLE_EXTERNAL_ID=\"tenant-42\" is invalid: is only used with ECR_REFRESH_ASSUME_ROLE_ARN",
        ),
        (
            vec![
                (
                    "ECR_REFRESH_ASSUME_ROLE_ARN",
                    "arn:aws:iam::123456789012:role/x",
                ),
                ("ECR_REFRESH_ASSUME_ROLE_SESSION_NAME", "has space"),
            ],
            "ECR_REFRESH_ASSUME_ROLE_SESSION_NAME=\"has space\" is invalid: must be 2 to 64",
        ),
    ] {
        let message = error(&vars);
        assert!(message.starts_with(starts), "{message}");
    }
}

#[test]
fn the_pushgateway_takes_a_url_and_grouping_labels() {
    let c = config(&[
        (
            "ECR_REFRESH_PUSHGATEWAY_URL",
            "http://pushgateway.monitoring:9091",
        ),
        ("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster=prod-eu"),
        ("ECR_REFRESH_EVENTS", "false"),
    ])
    .unwrap();
    let gateway = c.pushgateway.expect("a gateway");
    assert_eq!(
        gateway.group_url(),
        "http://pushgateway.monitoring:9091/metrics/job/ecr-refresh/cluster/prod-eu"
    );
    assert!(!c.events);
    for (vars, accepted) in [
        (
            &[("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster=a")][..],
            "only used with ECR_REFRESH_PUSHGATEWAY_URL",
        ),
        (
            &[("ECR_REFRESH_PUSHGATEWAY_URL", "pushgateway:9091")][..],
            "base URL",
        ),
        (
            &[
                ("ECR_REFRESH_PUSHGATEWAY_URL", "http://gw:9091"),
                ("ECR_REFRESH_PUSHGATEWAY_LABELS", "cluster-name=a"),
            ][..],
            "not a Prometheus label name",
        ),
    ] {
        let message = error(vars);
        assert!(message.contains(accepted), "{message}");
    }
}

#[test]
fn empty_values_mean_the_default() {
    let c = config(&[
        ("ECR_REFRESH_CONCURRENCY", ""),
        ("ECR_REFRESH_NAMESPACES", " "),
    ])
    .unwrap();
    assert_eq!(c.concurrency, 16);
    assert_eq!(c.selection.include, Include::All);
}

#[test]
fn bad_values_name_the_variable_the_value_and_what_is_accepted() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "ECR_REFRESH_CONCURRENCY",
            "lots",
            "must be a whole number from 1 to 1024",
        ),
        ("ECR_REFRESH_CONCURRENCY", "0", "from 1 to 1024"),
        (
            "ECR_REFRESH_TIMEOUT",
            "5 minutes please",
            "like '90s', '5m'",
        ),
        ("ECR_REFRESH_LOG_FORMAT", "yaml", "must be 'text' or 'json'"),
        ("ECR_REFRESH_DRY_RUN", "maybe", "must be true or false"),
        ("ECR_REFRESH_SECRET_NAME", "Bad_Name", "DNS subdomain"),
        (
            "ECR_REFRESH_REGISTRIES",
            "docker.io",
            "<account>.dkr.ecr.<region>.amazonaws.com",
        ),
        ("ECR_REFRESH_NAMESPACES", "team_a", "DNS label"),
        (
            "ECR_REFRESH_NAMESPACE_SELECTOR",
            "team in a,b",
            "label selector",
        ),
        ("ECR_REFRESH_SERVICE_ACCOUNTS", "Default", "DNS subdomain"),
        ("ECR_REFRESH_RENEW_BEFORE", "abc", "a duration above zero"),
        ("ECR_REFRESH_RENEW_BEFORE", "-1h", "a duration above zero"),
        ("ECR_REFRESH_RENEW_BEFORE", "0s", "a duration above zero"),
    ];
    for (variable, value, accepted) in cases {
        let message = error(&[(variable, value)]);
        assert!(message.starts_with(&format!("{variable}=")), "{message}");
        assert!(message.contains(value), "{message}");
        assert!(message.contains(accepted), "{variable}: {message}");
    }
}

#[test]
fn an_unknown_variable_is_refused_with_the_nearest_known_name() {
    let message = error(&[("ECR_REFRESH_NAMESPACE", "a")]);
    assert!(
        message.contains("ECR_REFRESH_NAMESPACE is not a variable"),
        "{message}"
    );
    assert!(
        message.contains("did you mean ECR_REFRESH_NAMESPACES?"),
        "{message}"
    );
    // Far from every name (ECR_REFRESH_MODE is four edits from ECR_REFRESH_ZZZ).
    let message = error(&[("ECR_REFRESH_ZZZZZZZZ", "a")]);
    assert!(!message.contains("did you mean"), "{message}");
}

#[test]
fn the_test_lane_variable_is_tolerated() {
    assert!(config(&[("ECR_REFRESH_E2E_KUBECONFIG", "/tmp/k")]).is_ok());
}

#[test]
fn a_namespace_named_twice_is_visited_once() {
    let c = config(&[("ECR_REFRESH_NAMESPACES", "a,b,a")]).unwrap();
    let names: Vec<&str> = c
        .selection
        .literal_names()
        .unwrap()
        .iter()
        .map(|n| n.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn literal_names_need_no_list_unless_a_selector_is_set() {
    let c = config(&[
        ("ECR_REFRESH_NAMESPACES", "team-a, team-b,team-c"),
        ("ECR_REFRESH_EXCLUDE_NAMESPACES", "team-c"),
    ])
    .unwrap();
    let names: Vec<&str> = c
        .selection
        .literal_names()
        .unwrap()
        .iter()
        .map(|n| n.as_str())
        .collect();
    assert_eq!(names, ["team-a", "team-b"]);

    let c = config(&[
        ("ECR_REFRESH_NAMESPACES", "team-a"),
        ("ECR_REFRESH_NAMESPACE_SELECTOR", "env=prod"),
    ])
    .unwrap();
    assert!(c.selection.literal_names().is_none());

    let c = config(&[("ECR_REFRESH_NAMESPACES", "team-*")]).unwrap();
    assert!(c.selection.literal_names().is_none());
}

#[test]
fn selection_includes_globs_and_takes_out_exclusions() {
    let c = config(&[
        ("ECR_REFRESH_NAMESPACES", "team-*,ops"),
        ("ECR_REFRESH_EXCLUDE_NAMESPACES", "team-?-old"),
    ])
    .unwrap();
    for (namespace, selected) in [
        ("team-a", true),
        ("ops", true),
        ("team-b-old", false),
        ("kube-system", false),
    ] {
        assert_eq!(c.selection.matches(namespace), selected, "{namespace}");
    }
    let all = config(&[("ECR_REFRESH_NAMESPACES", "*")]).unwrap();
    assert_eq!(all.selection.include, Include::All);
}

#[test]
fn registries_are_deduplicated_in_order() {
    let c = config(&[(
        "ECR_REFRESH_REGISTRIES",
        "111111111111.dkr.ecr.eu-west-1.amazonaws.com,https://111111111111.dkr.ecr.eu-west-1.amazonaws.com/,222222222222.dkr.ecr.us-east-1.amazonaws.com",
    )])
    .unwrap();
    let hosts: Vec<&str> = c.registries.iter().map(|r| r.host()).collect();
    assert_eq!(
        hosts,
        [
            "111111111111.dkr.ecr.eu-west-1.amazonaws.com",
            "222222222222.dkr.ecr.us-east-1.amazonaws.com"
        ]
    );
}

#[test]
fn dual_stack_is_refused_for_a_registry_whose_partition_has_no_dual_stack_hosts() {
    let partitions = crate::aws::partition::with_new_partition(true, false);
    let host = |h: &str| RegistryHost::parse_in(h, &partitions).unwrap();
    let with_twin = host("123456789012.dkr.ecr.us-east-1.amazonaws.com");
    let without = host("123456789012.dkr.ecr.nw-north-1.amazonaws.new");
    assert_eq!(
        twins(std::slice::from_ref(&with_twin), true, Some("true")).map(|w| w.len()),
        Ok(2)
    );
    let err = twins(&[with_twin, without], true, Some("true"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "ECR_REFRESH_DUAL_STACK=\"true\" is invalid: cannot be true here: the registry \
             123456789012.dkr.ecr.nw-north-1.amazonaws.new is in partition aws-new"
        ),
        "{err}"
    );
}

#[test]
fn mode_and_log_format_take_any_letter_case_as_the_booleans_do() {
    let c = config(&[
        ("ECR_REFRESH_MODE", "Check"),
        ("ECR_REFRESH_LOG_FORMAT", "JSON"),
        ("ECR_REFRESH_DRY_RUN", "TRUE"),
    ])
    .unwrap();
    assert_eq!(c.mode, Mode::Check);
    assert_eq!(c.log_format, LogFormat::Json);
    assert!(c.dry_run);
    let e = error(&[("ECR_REFRESH_LOG_FORMAT", "yaml")]);
    assert!(
        e.contains("must be 'text' or 'json' (any letter case)"),
        "{e}"
    );
}

#[test]
fn kube_public_and_kube_node_lease_are_left_out_by_default() {
    let c = config(&[]).unwrap();
    let out: Vec<&str> = c.selection.exclude.iter().map(Glob::as_str).collect();
    assert_eq!(out, ["kube-public", "kube-node-lease"]);
    // Setting the variable replaces the default.
    let c = config(&[("ECR_REFRESH_EXCLUDE_NAMESPACES", "legacy-*")]).unwrap();
    let out: Vec<&str> = c.selection.exclude.iter().map(Glob::as_str).collect();
    assert_eq!(out, ["legacy-*"]);
}

#[test]
fn a_namespace_named_literally_wins_over_the_default_exclusions() {
    let c = config(&[("ECR_REFRESH_NAMESPACES", "kube-public,team-*")]).unwrap();
    let out: Vec<&str> = c.selection.exclude.iter().map(Glob::as_str).collect();
    assert_eq!(out, ["kube-node-lease"]);
    let c = config(&[("ECR_REFRESH_NAMESPACES", "kube-node-lease")]).unwrap();
    assert_eq!(
        c.selection.literal_names().unwrap(),
        [&NamespaceName::from_str("kube-node-lease").unwrap()]
    );
}

#[test]
fn credentials_in_a_refused_url_never_reach_the_error() {
    for value in [
        "ftp://admin:hunter2@pushgateway:9091",
        "http://admin:hunter2@pushgateway:9091/?x=1",
        "https://:hunter2@pushgateway:9091",
    ] {
        let e = error(&[("ECR_REFRESH_PUSHGATEWAY_URL", value)]);
        assert!(!e.contains("hunter2"), "{e}");
        assert!(e.contains("[redacted]@pushgateway:9091"), "{e}");
    }
    // Any variable's value, not only the Pushgateway's.
    let e = error(&[(
        "ECR_REFRESH_REGISTRIES",
        "https://AWS:token@123456789012.dkr.ecr.us-east-1.amazonaws.com",
    )]);
    assert!(!e.contains("token@"), "{e}");
}

#[test]
fn userinfo_is_redacted_in_every_url_of_a_value() {
    for (value, shown) in [
        ("http://u:p@h/x", "http://[redacted]@h/x"),
        (
            "a http://u@h b https://h2/@x",
            "a http://[redacted]@h b https://h2/@x",
        ),
        ("no url at all", "no url at all"),
        ("http://h:9091", "http://h:9091"),
        ("s://u:p@h?q=@", "s://[redacted]@h?q=@"),
    ] {
        assert_eq!(redact_userinfo(value), shown, "{value}");
    }
}

#[test]
fn evicting_stuck_pods_is_off_by_default_and_takes_a_limit() {
    assert_eq!(config(&[]).unwrap().evict_stuck_pods, None);
    assert_eq!(
        config(&[("ECR_REFRESH_EVICT_STUCK_PODS", "true")])
            .unwrap()
            .evict_stuck_pods,
        Some(DEFAULT_EVICT_LIMIT)
    );
    assert_eq!(
        config(&[
            ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
            ("ECR_REFRESH_EVICT_LIMIT", "3")
        ])
        .unwrap()
        .evict_stuck_pods,
        Some(3)
    );
    // A limit without the option: accepted, unused (manifests carry its default).
    assert_eq!(
        config(&[("ECR_REFRESH_EVICT_LIMIT", "50")])
            .unwrap()
            .evict_stuck_pods,
        None
    );
    for bad in ["0", "-1", "many", "10001"] {
        let e = error(&[
            ("ECR_REFRESH_EVICT_STUCK_PODS", "true"),
            ("ECR_REFRESH_EVICT_LIMIT", bad),
        ]);
        assert!(
            e.contains("ECR_REFRESH_EVICT_LIMIT") && e.contains("from 1 to 10000"),
            "{e}"
        );
    }
    let e = error(&[("ECR_REFRESH_EVICT_STUCK_PODS", "yes please")]);
    assert!(e.contains("ECR_REFRESH_EVICT_STUCK_PODS"), "{e}");
}

#[test]
fn roles_anywhere_takes_all_five_values_or_none_and_one_region() {
    const ANCHOR: &str = "arn:aws:rolesanywhere:eu-west-1:123456789012:trust-anchor/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    const PROFILE: &str =
        "arn:aws:rolesanywhere:eu-west-1:123456789012:profile/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    assert_eq!(config(&[]).unwrap().roles_anywhere, None);
    let message = error(&[("ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN", PROFILE)]);
    assert!(
        message.starts_with(
            "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN is set, but not \
             ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN, ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN, \
             ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY"
        ),
        "{message}"
    );
    let message = error(&[("ECR_REFRESH_ROLES_ANYWHERE_CHAIN", "/etc/chain.pem")]);
    assert!(message.contains("is only used with"), "{message}");
    let message = error(&[
        ("ECR_REFRESH_ROLES_ANYWHERE_TRUST_ANCHOR_ARN", ANCHOR),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_PROFILE_ARN",
            &PROFILE.replace("eu-west-1", "us-east-1"),
        ),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_ROLE_ARN",
            "arn:aws:iam::123456789012:role/ecr",
        ),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE",
            "/nonexistent/tls.crt",
        ),
        (
            "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY",
            "/nonexistent/tls.key",
        ),
    ]);
    assert!(
        message.contains("is in region us-east-1, the trust anchor in eu-west-1"),
        "{message}"
    );
}

#[test]
fn clusters_are_off_unless_a_source_is_named() {
    assert_eq!(config(&[]).unwrap().clusters, None);
    let e = error(&[("ECR_REFRESH_CLUSTERS_NAMESPACE", "capi-system")]);
    assert!(
        e.contains("ECR_REFRESH_CLUSTERS_NAMESPACE") && e.contains("not set"),
        "{e}"
    );
}

#[test]
fn clusters_take_their_defaults_and_argocd_its_namespace() {
    let c = config(&[("ECR_REFRESH_CLUSTERS", "argocd")]).unwrap();
    let clusters = c.clusters.unwrap();
    assert_eq!(clusters.source, crate::fleet::Source::ArgoCd);
    assert_eq!(clusters.namespaces, vec!["argocd".parse().unwrap()]);
    assert_eq!(clusters.concurrency, 4);
    assert!(!clusters.include_local);
    assert_eq!(
        clusters.service_account.to_string(),
        "ecr-refresh/ecr-refresh"
    );
    assert_eq!(
        clusters.check_service_account.to_string(),
        "ecr-refresh/ecr-refresh-check"
    );
    assert_eq!(clusters.auth, crate::fleet::Auth::TokenRequest);
}

#[test]
fn capi_needs_its_namespaces_and_a_directory_takes_none() {
    let e = error(&[("ECR_REFRESH_CLUSTERS", "capi")]);
    assert!(e.contains("ECR_REFRESH_CLUSTERS_NAMESPACE"), "{e}");
    let c = config(&[
        ("ECR_REFRESH_CLUSTERS", "capi"),
        ("ECR_REFRESH_CLUSTERS_NAMESPACE", "fleet-a, fleet-b,fleet-a"),
        ("ECR_REFRESH_CLUSTERS_SELECTOR", "env=prod"),
    ])
    .unwrap();
    let clusters = c.clusters.unwrap();
    assert_eq!(clusters.namespaces.len(), 2, "each namespace once");
    assert!(clusters.selector.is_some());
    let e = error(&[
        ("ECR_REFRESH_CLUSTERS", "dir:/clusters"),
        ("ECR_REFRESH_CLUSTERS_NAMESPACE", "x"),
    ]);
    assert!(e.contains("dir:"), "{e}");
    let e = error(&[("ECR_REFRESH_CLUSTERS", "rancher")]);
    assert!(e.contains("ECR_REFRESH_CLUSTERS=\"rancher\""), "{e}");
}
