//! Every AWS partition's registry hosts, from the partition data the AWS SDK resolves endpoints
//! with: Secrets written in each partition, a host of the wrong partition refused before
//! anything is sent, and the data checked against the SDK itself and against README.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_sdk_ecr::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use common::*;
use ecr_refresh::aws::partition::{Partitions, SDK_PARTITIONS_JSON};
use ecr_refresh::aws::registry::dual_stack_suffix;
use serde_json::Value;

const ACCOUNT: &str = "123456789012";

fn auths_keys(secret: &Value) -> Vec<String> {
    docker_config(secret)["auths"]
        .as_object()
        .expect("an auths object")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn a_secret_is_written_for_an_amazonaws_eu_registry_with_aws_region_eusc_de_east_1() {
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    h.ecr.set_password("eusc-de-east-1", "sovereign-pw");
    let host = "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu";

    let run = h.run(&[
        ("ECR_REFRESH_REGISTRIES", host),
        ("AWS_REGION", "eusc-de-east-1"),
    ]);

    run.expect_code(0);
    assert_eq!(run.outcome("team-a"), "created");
    let secret = h.secret("team-a").expect("the Secret is written");
    assert_eq!(auths_keys(&secret), [host]);
    assert_eq!(password(&secret, host), "sovereign-pw");
    assert_eq!(
        h.ecr.calls(),
        [("eusc-de-east-1".to_owned(), vec![ACCOUNT.to_owned()])],
        "the token is asked in the registry's region, signed for it"
    );
}

/// The caller's own registry: ECR names it (its proxyEndpoint), in whatever partition
/// AWS_REGION is. The expected hosts are written out, not derived from our data.
#[test]
fn the_callers_own_registry_is_written_in_every_partition() {
    for (region, host) in [
        (
            "eusc-de-east-1",
            "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu",
        ),
        (
            "cn-north-1",
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
        ),
        (
            "us-gov-east-1",
            "123456789012.dkr.ecr.us-gov-east-1.amazonaws.com",
        ),
        (
            "us-iso-east-1",
            "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov",
        ),
        (
            "us-isob-east-1",
            "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
        ),
        (
            "eu-isoe-west-1",
            "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
        ),
        (
            "us-isof-south-1",
            "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov",
        ),
        (
            "ap-southeast-7",
            "123456789012.dkr.ecr.ap-southeast-7.amazonaws.com",
        ),
    ] {
        let h = Harness::new();
        h.namespaces(&["team-a"]);

        let run = h.run(&[("ECR_REFRESH_REGISTRIES", ""), ("AWS_REGION", region)]);

        run.expect_code(0);
        let secret = h.secret("team-a").expect("the Secret is written");
        assert_eq!(auths_keys(&secret), [host], "{region}");
        assert_eq!(h.ecr.calls(), [(region.to_owned(), vec![])], "{region}");
    }
}

/// One host of each partition, with ECR_REFRESH_DUAL_STACK=true: each is served by its own
/// region's token, and gets its partition's dual-stack twin.
#[test]
fn one_host_of_each_partition_and_its_dual_stack_twin_are_written_from_its_regions_token() {
    let hosts = [
        (
            "us-east-1",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com",
            "123456789012.dkr-ecr.us-east-1.on.aws",
        ),
        (
            "us-gov-west-1",
            "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
            "123456789012.dkr-ecr-fips.us-gov-west-1.on.aws",
        ),
        (
            "cn-northwest-1",
            "123456789012.dkr.ecr.cn-northwest-1.amazonaws.com.cn",
            "123456789012.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn",
        ),
        (
            "eusc-de-east-1",
            "123456789012.dkr.ecr-fips.eusc-de-east-1.amazonaws.eu",
            "123456789012.dkr-ecr-fips.eusc-de-east-1.on.amazonwebservices.eu",
        ),
        (
            "us-iso-west-1",
            "123456789012.dkr.ecr.us-iso-west-1.c2s.ic.gov",
            "123456789012.dkr-ecr.us-iso-west-1.on.aws.ic.gov",
        ),
        (
            "us-isob-east-1",
            "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
            "123456789012.dkr-ecr.us-isob-east-1.on.aws.scloud",
        ),
        (
            "eu-isoe-west-1",
            "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
            "123456789012.dkr-ecr.eu-isoe-west-1.on.cloud-aws.adc-e.uk",
        ),
        (
            "us-isof-south-1",
            "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov",
            "123456789012.dkr-ecr.us-isof-south-1.on.aws.hci.ic.gov",
        ),
    ];
    let h = Harness::new();
    h.namespaces(&["team-a"]);
    for (region, _, _) in hosts {
        h.ecr.set_password(region, &format!("pw-of-{region}"));
    }
    let configured: Vec<&str> = hosts.iter().map(|(_, host, _)| *host).collect();

    let run = h.run(&[
        ("ECR_REFRESH_REGISTRIES", &configured.join(",")),
        ("ECR_REFRESH_DUAL_STACK", "true"),
    ]);

    run.expect_code(0);
    let secret = h.secret("team-a").expect("the Secret is written");
    let written: Vec<&str> = hosts
        .iter()
        .flat_map(|(_, host, twin)| [*host, *twin])
        .collect();
    assert_eq!(auths_keys(&secret), written);
    for (region, host, twin) in hosts {
        let expected = format!("pw-of-{region}");
        assert_eq!(password(&secret, host), expected, "{host}");
        assert_eq!(password(&secret, twin), expected, "{twin}");
    }
    let regions: Vec<String> = h.ecr.calls().into_iter().map(|(r, _)| r).collect();
    assert_eq!(
        regions,
        hosts.map(|(region, _, _)| region),
        "one call per region, in its partition"
    );
}

#[test]
fn a_suffix_of_another_partition_than_its_regions_is_refused_before_anything_is_sent() {
    for (bad, named) in [
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.eu",
            "ends in .amazonaws.eu, the suffix of partition aws-eusc, but its region us-east-1 \
             is in partition aws, whose registry hosts end in .amazonaws.com",
        ),
        (
            "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.com",
            "its region eusc-de-east-1 is in partition aws-eusc, whose registry hosts end in \
             .amazonaws.eu",
        ),
        (
            "123456789012.dkr-ecr.cn-north-1.on.aws",
            "its region cn-north-1 is in partition aws-cn, whose dual-stack registry hosts end \
             in .on.amazonwebservices.com.cn",
        ),
    ] {
        let h = Harness::new();
        h.namespaces(&["team-a"]);

        // A good host first: the bad one still stops the run before its token is asked.
        let run = h.run(&[("ECR_REFRESH_REGISTRIES", &format!("{REGISTRY},{bad}"))]);

        run.expect_code(2);
        let error = run.lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            error.starts_with("ECR_REFRESH_REGISTRIES=") && error.contains(bad),
            "{error}"
        );
        assert!(error.contains(named), "{bad}: {error}");
        assert!(h.ecr.calls().is_empty(), "no token asked for {bad}");
        assert!(h.ecr.public_calls().is_empty());
        assert_eq!(h.cluster.request_count(), 0, "the cluster is not asked");
    }
}

#[test]
fn help_lists_every_partitions_registry_hosts() {
    let out = Command::new(env!("CARGO_BIN_EXE_ecr-refresh"))
        .arg("--help")
        .env_clear()
        .output()
        .expect("ecr-refresh runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for (partition, host) in [
        (
            "aws-eusc (e.g. eusc-de-east-1)",
            "<account>.dkr.ecr[-fips].<region>.amazonaws.eu",
        ),
        (
            "aws-iso-b (e.g. us-isob-east-1)",
            "<account>.dkr.ecr[-fips].<region>.sc2s.sgov.gov",
        ),
        (
            "aws-cn (e.g. cn-northwest-1)",
            "<account>.dkr.ecr[-fips].<region>.amazonaws.com.cn",
        ),
    ] {
        assert!(
            help.contains(&format!("  {partition}\n      {host}; dual-stack ")),
            "{partition} missing:\n{help}"
        );
    }
}

/// For every partition and every region it lists, the SDK's own ECR endpoint resolver puts
/// ECR's API under the suffixes our data gives that region; the dual-stack registry suffix is
/// the API's dual-stack suffix with `on.` for `api.`.
#[test]
fn the_sdks_ecr_endpoints_in_each_partition_end_in_our_suffixes() {
    let partitions = Partitions::sdk();
    let resolver = DefaultResolver::new();
    let resolve = |region: &str, fips: bool, dual_stack: bool| -> String {
        let params = Params::builder()
            .region(region)
            .use_fips(fips)
            .use_dual_stack(dual_stack)
            .build()
            .expect("endpoint parameters");
        futures::executor::block_on(ResolveEndpoint::resolve_endpoint(&resolver, &params))
            .unwrap_or_else(|e| panic!("the SDK resolves ECR in {region}: {e}"))
            .url()
            .to_owned()
    };
    let mut checked = 0;
    for p in partitions.all() {
        let mut regions = partitions.listed_regions(&p.id);
        regions.push(&p.implicit_global_region);
        for region in regions {
            let ours = partitions.of_region(region).expect("a partition");
            assert_eq!(ours.id, p.id, "{region}");
            assert_eq!(
                resolve(region, false, false),
                format!("https://api.ecr.{region}.{}", ours.dns_suffix)
            );
            assert_eq!(
                resolve(region, true, false),
                format!("https://api.ecr-fips.{region}.{}", ours.dns_suffix)
            );
            let dual = resolve(region, false, true);
            assert_eq!(
                dual,
                format!("https://ecr.{region}.{}", ours.dual_stack_dns_suffix)
            );
            let api_rest = dual
                .strip_prefix(&format!("https://ecr.{region}.api."))
                .expect("a dual-stack API host under api.");
            assert_eq!(
                dual_stack_suffix(&ours),
                Some(format!("on.{api_rest}")),
                "{region}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 8,
        "every partition was checked ({checked} regions)"
    );
}

/// `src/partitions.json` is the data the SDK in Cargo.lock embeds, read from that crate's
/// source (as `cargo metadata` locates it).
#[test]
fn the_partition_data_is_the_one_the_sdk_in_cargo_lock_embeds() {
    let source = sdk_source().join("src/endpoint_lib.rs");
    let code = std::fs::read_to_string(&source)
        .unwrap_or_else(|e| panic!("read {}: {e}", source.display()));
    let embedded = embedded_partitions(&code).unwrap_or_else(|| {
        panic!(
            "{} holds no `new_from_json(b\"...\")`: the SDK keeps its partitions elsewhere now; \
             find them and change this test",
            source.display()
        )
    });
    let sdk: Value = serde_json::from_str(&embedded).expect("the SDK's partitions are JSON");
    let ours: Value = serde_json::from_str(SDK_PARTITIONS_JSON).expect("ours are JSON");
    assert!(
        sdk == ours,
        "{} embeds other partition data than src/partitions.json: copy the JSON of its \
         `new_from_json(b\"...\")` there (unescaped, pretty-printed) and name its version in \
         partition::SOURCE (the book's registry hosts page follows: UPDATE_DOCS=1)",
        source.display()
    );
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The aws-sdk-ecr crate this build uses, by `cargo metadata` (for this host's platform only:
/// other platforms' crates need not be downloaded).
fn sdk_source() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    let rustc = String::from_utf8_lossy(&rustc.stdout);
    let host = rustc
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(["--filter-platform", host])
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("run {cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "aws-sdk-ecr")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("aws-sdk-ecr among the packages");
    Path::new(manifest)
        .parent()
        .expect("a manifest's directory")
        .to_owned()
}

/// The JSON in the first `new_from_json(b"...")` of the SDK's generated code, unescaped.
fn embedded_partitions(code: &str) -> Option<String> {
    let start = code.find("new_from_json(b\"")? + "new_from_json(b\"".len();
    let mut json = String::new();
    let mut chars = code[start..].chars();
    loop {
        match chars.next()? {
            '"' => return Some(json),
            '\\' => match chars.next()? {
                c @ ('\\' | '"' | '\'') => json.push(c),
                'n' => json.push('\n'),
                other => panic!("an escape this test does not read: \\{other}"),
            },
            c => json.push(c),
        }
    }
}
