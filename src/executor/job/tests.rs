use super::*;
use crate::domain::OperationType;
use uuid::Uuid;

fn settings() -> JobSettings {
    JobSettings {
        namespace: "jobs".into(),
        runner_image: "runner:1".into(),
        runner_resources: RunnerResources {
            cpu_request: "250m".into(),
            memory_request: "512Mi".into(),
            cpu_limit: "2".into(),
            memory_limit: "2Gi".into(),
        },
        host_network: false,
        env_config_map: None,
        traces: TraceSettings::off("provisioner"),
        state_encryption_secret: None,
        image_pull_secrets: Vec::new(),
        service_account_annotations: BTreeMap::new(),
    }
}

/// A private registry's pull Secrets reach the Job's pod; none configured, none named.
#[test]
fn the_pod_pulls_with_the_configured_secrets() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let pull_secrets = |settings: &JobSettings| {
        let job = build(settings, &modules(), RunAction::Plan, &names, &BTreeMap::new(), Duration::from_secs(60), None);
        let secrets = job.spec.unwrap().template.spec.unwrap().image_pull_secrets;
        secrets.map(|secrets| secrets.into_iter().map(|secret| secret.name).collect::<Vec<_>>())
    };
    assert_eq!(pull_secrets(&settings()), None);
    let private = JobSettings { image_pull_secrets: vec!["registry-a".into(), "registry-b".into()], ..settings() };
    assert_eq!(pull_secrets(&private), Some(vec!["registry-a".to_owned(), "registry-b".to_owned()]));
}

/// With a state encryption Secret the runner gets the passphrase by reference only: no value in the spec.
#[test]
fn the_state_passphrase_comes_from_its_secret_by_reference() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let runner_env = |settings: &JobSettings| runner_variables(settings, &names, None);
    assert!(!runner_env(&settings()).iter().any(|variable| variable.name == "RUNNER_STATE_PASSPHRASE"));
    let encrypted = JobSettings { state_encryption_secret: Some("state-key".into()), ..settings() };
    let variables = runner_env(&encrypted);
    let passphrase = variables.iter().find(|variable| variable.name == "RUNNER_STATE_PASSPHRASE").unwrap();
    assert_eq!(passphrase.value, None);
    let reference = passphrase.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
    assert_eq!((reference.name.as_str(), reference.key.as_str()), ("state-key", "passphrase"));
}

/// Both containers are bounded, and only the runner gets the ServiceAccount token.
#[test]
fn both_containers_are_bounded_and_only_the_runner_gets_a_token() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let job = build(&settings(), &modules(), RunAction::Apply, &names, &BTreeMap::new(), Duration::from_secs(60), None);
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let (init, runner) = (&pod.init_containers.as_ref().unwrap()[0], &pod.containers[0]);
    for container in [init, runner] {
        let resources = container.resources.as_ref().expect("resources");
        for set in [&resources.requests, &resources.limits] {
            let set = set.as_ref().expect("requests and limits");
            assert!(set.contains_key("cpu") && set.contains_key("memory"), "{}: {set:?}", container.name);
        }
    }
    assert_eq!(runner.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"], Quantity("2Gi".into()));
    let token_mounts = |container: &Container| {
        container.volume_mounts.iter().flatten().filter(|mount| mount.mount_path == API_ACCESS_PATH).count()
    };
    assert_eq!((token_mounts(init), token_mounts(runner)), (0, 1));
}

fn modules() -> ModulesSettings {
    ModulesSettings {
        source: ModulesSource::new(
            "https://git.example.com/modules.git",
            "v1.0.0",
            "0123456789abcdef0123456789abcdef01234567",
            false,
        )
        .unwrap(),
        credentials_secret: Some("modules-repo".into()),
        allow_local: false,
    }
}

/// The init container fetches and checks the pinned commit; the repository's credentials are mounted into it
/// alone, and its variables name the source only.
#[test]
fn only_the_init_container_gets_the_modules_repository_credentials() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let job = build(&settings(), &modules(), RunAction::Apply, &names, &BTreeMap::new(), Duration::from_secs(60), None);
    let pod = job.spec.unwrap().template.spec.unwrap();
    let init = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.command.as_deref(), Some(&["terraform-runner".to_owned(), "fetch-modules".to_owned()][..]));
    let env: BTreeMap<_, _> =
        init.env.iter().flatten().map(|var| (var.name.as_str(), var.value.as_deref().unwrap())).collect();
    assert_eq!(env["MODULES_REPO_COMMIT"], "0123456789abcdef0123456789abcdef01234567");
    assert_eq!(env["MODULES_REPO_REF"], "v1.0.0");
    assert!(!env.contains_key("MODULES_REPO_ALLOW_LOCAL"));
    let mounted = |container: &Container| {
        container.volume_mounts.iter().flatten().any(|mount| mount.name == MODULES_CREDENTIALS_VOLUME)
    };
    assert!(mounted(init));
    assert!(!mounted(&pod.containers[0]), "the runner never sees the repository's credentials");
    let volume = pod.volumes.unwrap().into_iter().find(|volume| volume.name == MODULES_CREDENTIALS_VOLUME);
    assert_eq!(volume.unwrap().secret.unwrap().secret_name.as_deref(), Some("modules-repo"));
}

#[test]
fn the_job_never_retries_and_mounts_credentials_as_files() {
    let names = RunNames::new(OperationType::Deprovision, Uuid::now_v7());
    let job =
        build(&settings(), &modules(), RunAction::Destroy, &names, &BTreeMap::new(), Duration::from_secs(600), None);
    let spec = job.spec.unwrap();
    assert_eq!(spec.backoff_limit, Some(0));
    let rules = &spec.pod_failure_policy.as_ref().unwrap().rules;
    let refused: Vec<_> = rules
        .iter()
        .map(|rule| {
            let exit_codes = rule.on_exit_codes.as_ref().unwrap();
            (rule.action.as_str(), exit_codes.container_name.as_deref(), exit_codes.values.clone())
        })
        .collect();
    let runner = Some("terraform-runner");
    assert_eq!(refused, [("FailJob", runner, vec![3]), ("FailJob", runner, vec![4])]);
    assert_eq!(spec.active_deadline_seconds, Some(600));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(names.job.as_str()), "the run's own identity");
    let runner = &pod.containers[0];
    assert_eq!(runner.command.as_ref().unwrap(), &["terraform-runner"]);
    assert_eq!(runner.args.as_ref().unwrap(), &["--action", "destroy"]);
    // Values only, but for the pod's own fields.
    let from_fields: Vec<(&str, &str)> = runner
        .env
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|variable| {
            let field = variable.value_from.as_ref()?.field_ref.as_ref()?;
            Some((variable.name.as_str(), field.field_path.as_str()))
        })
        .collect();
    assert_eq!(
        from_fields,
        [
            ("POD_NAMESPACE", "metadata.namespace"),
            ("POD_NAME", "metadata.name"),
            ("RUNNER_OPERATION_ID", "metadata.labels['kubeopera.io/operation-id']")
        ]
    );
    assert!(
        runner.env.as_ref().unwrap().iter().all(|variable| variable.value.is_some() || variable.value_from.is_some())
    );
    let volumes = pod.volumes.unwrap();
    let credentials = volumes.iter().find(|volume| volume.name == "credentials").unwrap();
    assert_eq!(credentials.secret.as_ref().unwrap().secret_name.as_deref(), Some(names.credentials_secret.as_str()));
    let init = &pod.init_containers.unwrap()[0];
    assert!(init.env.iter().flatten().any(|variable| variable.value.as_deref() == Some("v1.0.0")));
}

#[test]
fn the_runner_reads_what_the_job_sets_and_finds_it_mounted() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let job =
        build(&settings(), &modules(), RunAction::Apply, &names, &BTreeMap::new(), Duration::from_secs(600), None);
    let pod = job.spec.unwrap().template.spec.unwrap();
    let runner = &pod.containers[0];
    assert_eq!(runner.args.as_ref().unwrap(), &["--action", "apply"]);
    let variables: std::collections::HashMap<String, String> = runner
        .env
        .iter()
        .flatten()
        .filter_map(|variable| Some((variable.name.clone(), variable.value.clone()?)))
        .collect();
    let environment = RunnerEnvironment::parse(&variables).unwrap();
    assert_eq!(environment, RunnerEnvironment::for_job(names.outputs_secret.clone()));
    let mounted =
        |path: &std::path::Path| runner.volume_mounts.iter().flatten().any(|mount| path.starts_with(&mount.mount_path));
    for path in
        [&environment.config_dir, &environment.credentials_dir, &environment.work_dir, &environment.aws_config_dir]
    {
        assert!(mounted(path), "{} is not on a volume", path.display());
    }
    assert_eq!(pod.termination_grace_period_seconds, Some(RUNNER_GRACE_PERIOD.as_secs() as i64));
}

/// The node's network and the operator's variables only when configured; the Job's own variables are `env`,
/// which Kubernetes puts above anything from `envFrom`.
#[test]
fn host_network_and_the_operators_variables_are_opt_in() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let pod = |settings: &JobSettings| {
        let job =
            build(settings, &modules(), RunAction::Apply, &names, &BTreeMap::new(), Duration::from_secs(60), None);
        job.spec.unwrap().template.spec.unwrap()
    };
    let plain = pod(&settings());
    assert_eq!((plain.host_network, plain.dns_policy.as_deref()), (None, None));
    assert!(plain.containers[0].env_from.is_none() && plain.init_containers.unwrap()[0].env_from.is_none());

    let local = pod(&JobSettings { host_network: true, env_config_map: Some("runner-env".into()), ..settings() });
    assert_eq!((local.host_network, local.dns_policy.as_deref()), (Some(true), Some("ClusterFirstWithHostNet")));
    for container in [&local.containers[0], &local.init_containers.as_ref().unwrap()[0]] {
        let sources = container.env_from.as_ref().expect("the operator's variables");
        let config_map = sources[0].config_map_ref.as_ref().unwrap();
        assert_eq!((config_map.name.as_str(), config_map.optional), ("runner-env", Some(true)), "{}", container.name);
    }
}

/// With traces on, the runner exports where the service does and continues the trace of the span that created
/// its Job; the init container and a service without traces get none of it.
#[test]
fn the_runner_continues_the_trace_only_when_traces_are_on() {
    let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let pod = |settings: &JobSettings| {
        let deadline = Duration::from_secs(60);
        let job =
            build(settings, &modules(), RunAction::Apply, &names, &BTreeMap::new(), deadline, Some(traceparent.into()));
        job.spec.unwrap().template.spec.unwrap()
    };
    let names_of = |container: &Container| -> Vec<String> {
        container.env.iter().flatten().map(|variable| variable.name.clone()).collect()
    };
    let traced = TraceSettings::from_values(Some("http://collector:4318"), None, "provisioner", None, None).unwrap();
    let on = pod(&JobSettings { traces: traced, ..settings() });
    let runner: BTreeMap<_, _> =
        on.containers[0].env.iter().flatten().map(|var| (var.name.as_str(), var.value.clone())).collect();
    assert_eq!(runner["TRACEPARENT"].as_deref(), Some(traceparent));
    assert_eq!(runner["OTEL_EXPORTER_OTLP_ENDPOINT"].as_deref(), Some("http://collector:4318"));
    assert_eq!(runner["OTEL_SERVICE_NAME"].as_deref(), Some("terraform-runner"));
    assert!(!names_of(&on.init_containers.unwrap()[0]).iter().any(|name| name.starts_with("OTEL_")));
    let off = pod(&settings());
    assert!(!names_of(&off.containers[0]).iter().any(|name| name.starts_with("OTEL_") || name == "TRACEPARENT"));
}
