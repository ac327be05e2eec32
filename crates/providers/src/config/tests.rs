use super::*;
use std::path::Path;

const FILE: &str = r#"
default_profile = "deepseek"

[profiles.deepseek]
kind = "openai"
base_url = "https://api.deepseek.com"
model = "deepseek-chat"
context_window = 128000
temperature = 0.2

[profiles.ollama]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen3"

[profiles.claude]
kind = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "WORK_ANTHROPIC_KEY"
max_output_tokens = 16000
thinking_budget = 4000
max_attempts = 3
max_concurrent_requests = 8
"#;

fn file() -> ConfigFile {
    ConfigFile::parse(FILE, Path::new("config.toml")).unwrap()
}

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn flags_override_the_profile_which_overrides_defaults() {
    let defaults = RawProviderConfig {
        idle_timeout_secs: Some(300),
        temperature: Some(1.0),
        ..Default::default()
    };
    let flags = RawProviderConfig {
        model: Some("deepseek-reasoner".into()),
        ..Default::default()
    };
    let raw = defaults.merge(file().profile(None).unwrap()).merge(flags);
    let ProviderConfig::OpenAi { endpoint, retry } = raw
        .resolve_with(env(&[
            ("DEEPSEEK_API_KEY", "sk-ds"),
            ("OPENAI_API_KEY", "sk-oa"),
        ]))
        .unwrap()
    else {
        panic!("expected openai");
    };
    assert_eq!(endpoint.model, "deepseek-reasoner");
    assert_eq!(endpoint.base_url, "https://api.deepseek.com");
    assert_eq!(endpoint.temperature, Some(0.2));
    assert_eq!(endpoint.timeouts.idle, Duration::from_secs(300));
    assert_eq!(endpoint.context_window, Some(128000));
    // DeepSeek's own key, not OpenAI's.
    assert_eq!(endpoint.api_key.as_ref().map(ApiKey::expose), Some("sk-ds"));
    assert_eq!(retry, RetryPolicy::default());
}

#[test]
fn named_key_variable_and_anthropic_settings() {
    let raw = file().profile(Some("claude")).unwrap();
    let resolved = raw
        .resolve_with(env(&[("WORK_ANTHROPIC_KEY", "sk-ant-secret")]))
        .unwrap();
    let ProviderConfig::Anthropic { endpoint, retry } = &resolved else {
        panic!("expected anthropic");
    };
    assert_eq!(endpoint.base_url, "https://api.anthropic.com");
    assert_eq!(endpoint.thinking_budget, Some(4000));
    assert_eq!(endpoint.max_output_tokens, Some(16000));
    assert_eq!(retry.max_attempts, 3);
    assert_eq!(endpoint.max_concurrent, Some(8));
    let debug = format!("{resolved:?}");
    assert!(!debug.contains("sk-ant-secret"), "{debug}");
    assert!(debug.contains("***"));
    let err = raw.resolve_with(env(&[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable WORK_ANTHROPIC_KEY with the API key is not set"
    );
}

#[test]
fn local_servers_need_no_key_but_hosted_ones_do() {
    let ollama = file().profile(Some("ollama")).unwrap();
    let ProviderConfig::OpenAi { endpoint, .. } = ollama.resolve_with(env(&[])).unwrap() else {
        panic!("expected openai");
    };
    assert_eq!(endpoint.api_key, None);
    let openai = RawProviderConfig {
        kind: Some(ProviderKind::OpenAi),
        model: Some("gpt-4.1".into()),
        ..Default::default()
    };
    assert!(matches!(
        openai.resolve_with(env(&[])),
        Err(ConfigError::MissingKey(var)) if var == "OPENAI_API_KEY"
    ));
}

#[test]
fn errors_name_what_is_missing_or_wrong() {
    assert!(matches!(
        RawProviderConfig::default().resolve_with(env(&[])),
        Err(ConfigError::MissingKind)
    ));
    let no_model = RawProviderConfig {
        kind: Some(ProviderKind::Anthropic),
        ..Default::default()
    };
    assert!(matches!(
        no_model.resolve_with(env(&[])),
        Err(ConfigError::MissingModel("anthropic"))
    ));
    let hot = RawProviderConfig {
        kind: Some(ProviderKind::OpenAi),
        base_url: Some("http://localhost:8080/v1".into()),
        model: Some("m".into()),
        temperature: Some(3.0),
        ..Default::default()
    };
    assert!(matches!(
        hot.resolve_with(env(&[])),
        Err(ConfigError::Invalid {
            field: "temperature",
            ..
        })
    ));
    let unknown = file().profile(Some("gpt")).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no profile \"gpt\" in config.toml (known: claude, deepseek, ollama)"
    );
    let typo = ConfigFile::parse("[profiles.x]\nmodle = \"m\"\n", Path::new("c.toml")).unwrap_err();
    assert!(typo.to_string().contains("modle"), "{typo}");
    assert!(matches!(
        "gemini".parse::<ProviderKind>(),
        Err(ConfigError::Invalid { field: "kind", .. })
    ));
}

#[test]
fn scripted_kind_needs_a_script() {
    let raw = RawProviderConfig {
        kind: Some(ProviderKind::Scripted),
        ..Default::default()
    };
    assert!(matches!(
        raw.resolve_with(env(&[])),
        Err(ConfigError::MissingScript)
    ));
    let raw = RawProviderConfig {
        script: Some("demo.json".into()),
        ..raw
    };
    assert_eq!(
        raw.resolve_with(env(&[])).unwrap(),
        ProviderConfig::Scripted {
            script: "demo.json".into()
        }
    );
}

#[test]
fn missing_file_is_an_empty_config() {
    let path = std::env::temp_dir().join(format!("pod-no-such-{}.toml", uuid::Uuid::new_v4()));
    let file = ConfigFile::load(&path).unwrap();
    assert!(!file.exists());
    assert_eq!(file.path, path, "it says where it was looked for");
    assert_eq!(
        ConfigFile {
            path: Default::default(),
            ..file
        },
        ConfigFile::default()
    );
}

#[test]
fn a_loaded_file_is_read_each_time_and_an_edit_takes_effect() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let with = |model: &str| {
        format!("[profiles.main]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"{model}\"\n")
    };
    let model = |file: &ConfigFile| file.profile(Some("main")).unwrap().model.clone();
    std::fs::write(&path, with("first")).unwrap();
    let first = ConfigFile::load(&path).unwrap();
    assert_eq!(model(&first).as_deref(), Some("first"));
    // The same text again: the same config.
    assert_eq!(ConfigFile::load(&path).unwrap(), first);
    // Edited: the next load sees the edit.
    std::fs::write(&path, with("second")).unwrap();
    assert_eq!(
        model(&ConfigFile::load(&path).unwrap()).as_deref(),
        Some("second")
    );
    // Broken: an error, not the last good parse.
    std::fs::write(&path, "[profiles.main\n").unwrap();
    assert!(ConfigFile::load(&path).is_err());
    // The same text at another path names that path.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, with("second")).unwrap();
    std::fs::write(&path, with("second")).unwrap();
    assert_eq!(ConfigFile::load(&path).unwrap().path, path);
    assert_eq!(ConfigFile::load(&other).unwrap().path, other);
}

#[test]
fn the_approval_table_is_kept_for_front_ends() {
    let text = "[approval]\ndefault = \"ask\"\n[approval.tools]\nbash = \"allow\"\n";
    let parsed = ConfigFile::parse(text, Path::new("config.toml")).unwrap();
    let approval = parsed.approval.expect("the [approval] table");
    assert_eq!(approval["default"].as_str(), Some("ask"));
    assert_eq!(approval["tools"]["bash"].as_str(), Some("allow"));
    assert_eq!(file().approval, None);
}

#[test]
fn a_profile_script_is_relative_to_the_config_file() {
    let text = "[profiles.demo]\nkind = \"scripted\"\nscript = \"plan.json\"\n\
                [profiles.abs]\nkind = \"scripted\"\nscript = \"/tmp/abs.json\"\n";
    let file = ConfigFile::parse(text, Path::new("/home/u/.config/pod/config.toml")).unwrap();
    let demo = file.profile(Some("demo")).unwrap();
    assert_eq!(
        demo.script.as_deref(),
        Some(Path::new("/home/u/.config/pod/plan.json"))
    );
    let abs = file.profile(Some("abs")).unwrap();
    assert_eq!(abs.script.as_deref(), Some(Path::new("/tmp/abs.json")));
}

#[test]
fn an_unknown_profile_names_the_file_and_what_it_defines() {
    let empty = ConfigFile::parse("", Path::new("/c/config.toml")).unwrap();
    let err = empty.profile(Some("claude")).unwrap_err().to_string();
    assert_eq!(
        err,
        "no profile \"claude\" in /c/config.toml (it defines no profiles)"
    );
    let one =
        ConfigFile::parse("[profiles.a]\nkind = \"openai\"\n", Path::new("/c/x.toml")).unwrap();
    let err = one.profile(Some("b")).unwrap_err().to_string();
    assert_eq!(err, "no profile \"b\" in /c/x.toml (known: a)");
}

#[test]
fn a_profile_budget_table_is_kept_and_never_stored() {
    let text = "[profiles.a]\nkind = \"openai\"\n[profiles.a.budget]\nmax_requests = 7\n";
    let file = ConfigFile::parse(text, Path::new("config.toml")).unwrap();
    let profile = file.profile(Some("a")).unwrap();
    let budget = profile.budget.clone().unwrap();
    assert_eq!(
        budget.get("max_requests").and_then(|v| v.as_integer()),
        Some(7)
    );
    let stored = serde_json::to_value(&profile).unwrap();
    assert!(stored.get("budget").is_none(), "{stored}");
}

#[test]
fn caching_and_prices_come_from_the_profile() {
    let text = r#"
[profiles.long]
kind = "anthropic"
model = "claude-sonnet-4-5"
cache_ttl = "1h"
prices = { input = 3.0, cache_write = 6.0, cache_read = 0.3, output = 15.0 }

[profiles.nocache]
kind = "anthropic"
model = "claude-sonnet-4-5"
cache = false

[profiles.openai]
kind = "openai"
model = "gpt-4.1"

[profiles.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen"
"#;
    let file = ConfigFile::parse(text, Path::new("config.toml")).unwrap();
    let vars = env(&[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")]);
    let endpoint = |name: &str| match file.profiles[name].resolve_with(&vars).unwrap() {
        ProviderConfig::Anthropic { endpoint, .. } | ProviderConfig::OpenAi { endpoint, .. } => {
            endpoint
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(endpoint("long").cache.ttl, CacheTtl::OneHour);
    assert!(endpoint("long").cache.enabled);
    assert!(!endpoint("nocache").cache.enabled);
    // The key goes to OpenAI's own API only, unless a profile says so.
    assert!(endpoint("openai").cache.send_key);
    assert!(!endpoint("local").cache.send_key);
    let prices = file.profiles["long"].prices.unwrap();
    assert_eq!(prices.cache_write, 6.0);
    let bad = "[profiles.x]\nkind = \"anthropic\"\nmodel = \"m\"\ncache_ttl = \"2h\"\n";
    assert!(ConfigFile::parse(bad, Path::new("config.toml")).is_err());
}

#[test]
fn the_responses_kind_stores_by_default_and_a_profile_can_say_no() {
    let file = ConfigFile::parse(
        r#"
[profiles.gpt]
kind = "openai-responses"
model = "gpt-5"

[profiles.zdr]
kind = "openai-responses"
model = "gpt-5"
store = false
reasoning_effort = "low"
"#,
        Path::new("config.toml"),
    )
    .unwrap();
    let resolve = |name: &str| {
        file.profile(Some(name))
            .unwrap()
            .resolve_with(env(&[("OPENAI_API_KEY", "sk-oa")]))
            .unwrap()
    };
    let ProviderConfig::OpenAiResponses {
        endpoint, store, ..
    } = resolve("gpt")
    else {
        panic!("expected openai-responses");
    };
    assert!(store);
    assert_eq!(endpoint.reasoning_effort, None);
    assert_eq!(endpoint.base_url, OPENAI_URL);
    assert!(endpoint.api_key.is_some(), "api.openai.com needs its key");
    let ProviderConfig::OpenAiResponses {
        endpoint, store, ..
    } = resolve("zdr")
    else {
        panic!("expected openai-responses");
    };
    assert!(!store);
    assert_eq!(endpoint.reasoning_effort, Some(ReasoningEffort::Low));
    assert_eq!(
        "openai-responses".parse::<ProviderKind>().unwrap(),
        ProviderKind::OpenAiResponses
    );
}

#[test]
fn a_broken_file_is_named_with_its_line_column_and_the_parsers_caret() {
    let text = "[profiles.local]\nkind = \"openai\"\nmodel = qwen\n";
    let err = ConfigFile::parse(text, Path::new("/etc/pod/config.toml")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid config file /etc/pod/config.toml, line 3, column 9: invalid string; \
         expected `\"`, `'`"
    );
    let ConfigError::Parse { snippet, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(snippet, "  |\n3 | model = qwen\n  |         ^");

    // A config error (not TOML's) points at the key.
    let typo = "[profiles.x]\n\n  modle = \"m\"\n";
    let err = ConfigFile::parse(typo, Path::new("c.toml")).unwrap_err();
    let ConfigError::Parse {
        line_column,
        snippet,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*line_column, Some((3, 3)));
    assert!(message.starts_with("unknown field `modle`"), "{message}");
    assert_eq!(snippet, "  |\n3 |   modle = \"m\"\n  |   ^^^^^");
}
