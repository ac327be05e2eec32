//! The Managed Agents API's lifecycle through the official Python SDK:
//! agents updated into versions (a session pins one), archived; a session
//! with a `budget` that stops at it (`budget_reached`) and goes on when the
//! budget is raised or removed; sessions archived and deleted.

use crate::http::Server;
use crate::managed::run_client;
use crate::support::*;
use serde_json::{json, Value};

const CLIENT: &str = r#"
import json, os, signal
import anthropic

signal.alarm(90)
client = anthropic.Anthropic(base_url=os.environ["POD_BASE"], api_key=os.environ["POD_KEY"], max_retries=0)
out = {}

def error_of(call):
    try:
        call()
        return "accepted"
    except anthropic.APIStatusError as err:
        return {"class": type(err).__name__, "status": err.status_code, "message": err.body["error"]["message"]}

def text(message):
    return [{"type": "user.message", "content": [{"type": "text", "text": message}]}]

def until_idle(session_id, send=None):
    """The stop reason of the next idle, after sending `send`."""
    with client.beta.sessions.events.stream(session_id) as stream:
        if send is not None:
            send()
        for event in stream:
            if event.type == "session.status_idle":
                return event.stop_reason.type

# Versions: each change is a new one; an update that changes nothing is not.
agent = client.beta.agents.create(name="writer", model="default", system="Be brief.", metadata={"team": "a", "old": "x"})
v2 = client.beta.agents.update(agent.id, system="Be thorough.", metadata={"old": None, "new": "y"}, version=1)
same = client.beta.agents.update(agent.id, name="writer")
out["versions"] = {
    "v2": [v2.version, v2.system, v2.metadata],
    "same": same.version,
    "stale": error_of(lambda: client.beta.agents.update(agent.id, system="Lost update", version=1)),
    "v1": client.beta.agents.retrieve(agent.id, version=1).system,
    "listed": [a.version for a in client.beta.agents.versions.list(agent.id)],
    "no_v9": error_of(lambda: client.beta.agents.retrieve(agent.id, version=9)),
    "empty_name": error_of(lambda: client.beta.agents.update(agent.id, name="")),
}

environment = client.beta.environments.create(name="here", config={"type": "cloud", "networking": {"type": "unrestricted"}})

# A session pinned to version 1 runs as version 1.
pinned = client.beta.sessions.create(agent={"type": "agent", "id": agent.id, "version": 1}, environment_id=environment.id)
out["pinned"] = [pinned.agent.version, pinned.agent.system]

# A budget: $3.00 at $1.00 a request; the third request would pass it.
budgeted = client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
    budget={"type": "limit", "max_list_cost": {"amount": "150", "currency": "USD"}})
out["budget"] = budgeted.budget.max_list_cost.amount
out["stopped"] = until_idle(budgeted.id, lambda: client.beta.sessions.events.send(budgeted.id, events=text("Look twice, then answer.")))
raised = {}
def raise_it():
    raised["session"] = client.beta.sessions.update(budgeted.id, budget={"type": "limit", "max_list_cost": {"amount": "1000", "currency": "USD"}}, title="raised")
out["then"] = until_idle(budgeted.id, raise_it)
out["raised"] = [raised["session"].budget.max_list_cost.amount, raised["session"].title]
answers = [e for e in client.beta.sessions.events.list(budgeted.id, limit=100) if e.type == "agent.message"]
out["answer"] = "".join(b.text for b in answers[-1].content) if answers else None
out["not_created_with_one"] = error_of(lambda: client.beta.sessions.update(pinned.id, budget={"type": "limit", "max_list_cost": {"amount": "100", "currency": "USD"}}))
out["bad_currency"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
    budget={"type": "limit", "max_list_cost": {"amount": "100", "currency": "EUR"}}))

# The same budget removed once it stopped the session: it goes on.
lifted = client.beta.sessions.create(agent=agent.id, environment_id=environment.id,
    budget={"type": "limit", "max_list_cost": {"amount": "150", "currency": "USD"}})
out["lifted_stopped"] = until_idle(lifted.id, lambda: client.beta.sessions.events.send(lifted.id, events=text("Look twice, then answer.")))
removed = {}
def lift_it():
    removed["session"] = client.beta.sessions.update(lifted.id, budget=None)
out["lifted_then"] = until_idle(lifted.id, lift_it)
out["lifted_budget"] = removed["session"].budget
out["lifted_retrieved"] = client.beta.sessions.retrieve(lifted.id).budget

# Archived: no more events; deleted: gone.
archived = client.beta.sessions.archive(budgeted.id)
out["archived"] = archived.archived_at is not None
out["send_archived"] = error_of(lambda: client.beta.sessions.events.send(budgeted.id, events=text("More?")))
deleted = client.beta.sessions.delete(pinned.id)
out["deleted"] = [deleted.id == pinned.id, deleted.type]
out["after_delete"] = error_of(lambda: client.beta.sessions.retrieve(pinned.id))
out["sessions"] = sorted(s.id for s in client.beta.sessions.list())
out["ids"] = {"budgeted": budgeted.id, "pinned": pinned.id, "lifted": lifted.id}

# An archived agent starts no session, and leaves the list.
client.beta.agents.archive(agent.id)
out["agents"] = [a.id for a in client.beta.agents.list()]
out["with_archived"] = [a.id for a in client.beta.agents.list(include_archived=True)]
out["archived_agent"] = error_of(lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id))

# Environments: updated (the workspace checked again), archived, then no
# new session; deleted, then gone.
renamed = client.beta.environments.update(environment.id, name="there", description="the repo",
    metadata={"team": "a"}, config={"type": "cloud", "networking": {"type": "limited"}})
out["environment_updated"] = [renamed.name, renamed.description, renamed.metadata, renamed.config.networking.type]
out["environment_outside"] = error_of(lambda: client.beta.environments.update(environment.id, metadata={"pod.workspace": "/"}))
other = client.beta.agents.create(name="other", model="default")
spare = client.beta.environments.create(name="spare")
client.beta.environments.archive(spare.id)
out["environments"] = [e.id for e in client.beta.environments.list()]
out["archived_environment"] = error_of(lambda: client.beta.sessions.create(agent=other.id, environment_id=spare.id))
gone = client.beta.environments.delete(spare.id)
out["environment_deleted"] = [gone.id == spare.id, gone.type]
out["environment_after_delete"] = error_of(lambda: client.beta.environments.retrieve(spare.id))
out["environment_ids"] = {"kept": environment.id}
print(json.dumps(out))
"#;

#[test]
fn agents_have_versions_budgets_stop_and_are_raised_sessions_archive_and_delete() {
    let env = TestEnv::new();
    env.config_file(
        "[profiles.priced]\nkind = \"scripted\"\nprices = { input = 1.0, output = 1.0 }\n",
    );
    // Two looks and an answer, each 1.00 at a price of 1 per million.
    let usage = json!({"prompt_tokens": 1_000_000, "completion_tokens": 0});
    let script = json!({"steps": [
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": usage},
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "./"}}], "usage": usage},
        {"text": "Answered after the raise.", "usage": usage},
    ]});
    let path = env.script("serve-script.json", &script);
    let mut command = env.pod_process();
    command
        .args(["--yes", "--profile", "priced", "--script"])
        .arg(path);
    let server = Server::start_with(command, &env);
    let seen = run_client(&env, &server, CLIENT);

    let versions = &seen["versions"];
    assert_eq!(
        versions["v2"],
        json!([2, "Be thorough.", {"team": "a", "new": "y"}]),
        "{seen}"
    );
    assert_eq!(versions["same"], 2, "no change, no version: {seen}");
    assert_eq!(versions["stale"]["class"], "ConflictError", "{seen}");
    assert_eq!(versions["v1"], "Be brief.", "{seen}");
    assert_eq!(versions["listed"], json!([2, 1]), "{seen}");
    assert_eq!(versions["no_v9"]["class"], "NotFoundError", "{seen}");
    assert_eq!(versions["empty_name"]["class"], "BadRequestError", "{seen}");
    assert_eq!(seen["pinned"], json!([1, "Be brief."]), "{seen}");

    // The budget stopped the session before the request that would pass
    // it; raised, the session went on and answered.
    assert_eq!(seen["budget"], "150", "{seen}");
    assert_eq!(seen["stopped"], "budget_reached", "{seen}");
    assert_eq!(seen["raised"], json!(["1000", "raised"]), "{seen}");
    assert_eq!(seen["then"], "end_turn", "{seen}");
    assert_eq!(seen["answer"], "Answered after the raise.", "{seen}");
    assert_eq!(
        seen["not_created_with_one"]["class"], "BadRequestError",
        "{seen}"
    );
    assert!(
        seen["not_created_with_one"]["message"]
            .as_str()
            .unwrap()
            .contains("budget_create_only"),
        "{seen}"
    );
    assert_eq!(seen["bad_currency"]["class"], "BadRequestError", "{seen}");
    // The limit is the governor's, recorded in the session's log.
    let budgeted = seen["ids"]["budgeted"].as_str().unwrap();
    let uuid = uuid::Uuid::parse_str(budgeted.trim_start_matches("sesn_"))
        .unwrap()
        .to_string();
    let out = env
        .pod()
        .args(["budget", &uuid, "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let recorded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recorded["limits"]["cost"], 10.0, "{recorded}");
    // Removed, it stopped no more: the session went on and answered, and
    // its log records no money limit from then on.
    assert_eq!(seen["lifted_stopped"], "budget_reached", "{seen}");
    assert_eq!(seen["lifted_then"], "end_turn", "{seen}");
    assert_eq!(seen["lifted_budget"], Value::Null, "{seen}");
    assert_eq!(seen["lifted_retrieved"], Value::Null, "{seen}");
    let lifted = seen["ids"]["lifted"].as_str().unwrap();
    let lifted_uuid = uuid::Uuid::parse_str(lifted.trim_start_matches("sesn_"))
        .unwrap()
        .to_string();
    let out = env
        .pod()
        .args(["budget", &lifted_uuid, "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let recorded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(recorded["limits"]["cost"].is_null(), "{recorded}");

    assert_eq!(seen["archived"], true, "{seen}");
    assert_eq!(seen["send_archived"]["class"], "ConflictError", "{seen}");
    assert_eq!(seen["deleted"], json!([true, "session_deleted"]), "{seen}");
    assert_eq!(seen["after_delete"]["class"], "NotFoundError", "{seen}");
    let mut kept = vec![budgeted, lifted];
    kept.sort();
    assert_eq!(seen["sessions"], json!(kept), "{seen}");
    // The deleted session's pod session is gone too.
    let pinned = seen["ids"]["pinned"]
        .as_str()
        .unwrap()
        .trim_start_matches("sesn_");
    let listed: Vec<String> = env
        .sessions_json()
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    assert!(
        !listed.iter().any(|id| id.replace('-', "") == pinned),
        "{listed:?}"
    );

    assert_eq!(seen["agents"], json!([]), "{seen}");
    assert_eq!(
        seen["with_archived"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
    assert_eq!(seen["archived_agent"]["class"], "BadRequestError", "{seen}");

    assert_eq!(
        seen["environments"],
        json!([seen["environment_ids"]["kept"]]),
        "{seen}"
    );
    assert_eq!(
        seen["archived_environment"]["class"], "BadRequestError",
        "{seen}"
    );
    assert_eq!(
        seen["environment_deleted"],
        json!([true, "environment_deleted"]),
        "{seen}"
    );
    assert_eq!(
        seen["environment_after_delete"]["class"], "NotFoundError",
        "{seen}"
    );
}
