//! Subagents: `task` calls run child Pods in parallel, within the depth
//! limit and the parent's approval policy; cancelling the parent cancels
//! them; a failing child is an error result; and after a crash the parent
//! resumes its children from their logs instead of starting them over.

use crate::support::{calls_of, result_of, ScriptedApprover, TestPod};
use pod::log::LogRecord;
use pod::{child_session_id, ApprovalDecision, ItemKind, Pod, PodEvent, ToolPolicy, TASK};
use pod_llm::{validate_history, AgentScript, Item, Script, ScriptStep, ScriptedProvider};
use pod_testkit::tools::Rendezvous;
use pod_worker::TurnEndReason;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

// Only a deadlock guard: a turn that needs two children at once never ends
// when they run one after the other.
const DEADLOCK: Duration = Duration::from_secs(60);

fn task(description: &str, prompt: &str) -> Value {
    json!({"description": description, "prompt": prompt})
}

/// A model playing `parent` for the top-level session and each agent's
/// steps for the child whose task contains its key.
fn model(parent: Vec<ScriptStep>, agents: Vec<(&str, Vec<ScriptStep>)>) -> ScriptedProvider {
    let mut script = Script::new(parent);
    script.agents = agents
        .into_iter()
        .map(|(task, steps)| AgentScript {
            task: task.into(),
            steps,
        })
        .collect();
    ScriptedProvider::new(script)
}

fn test_pod(model: ScriptedProvider) -> TestPod {
    let mut test = TestPod::new(Vec::new());
    test.model = model;
    test
}

/// The ids and results of a history's `task` calls, in call order.
fn task_results(history: &[Item]) -> Vec<(String, String, bool)> {
    calls_of(history)
        .into_iter()
        .filter(|(_, name)| name == TASK)
        .map(|(id, _)| {
            let (content, is_error) = result_of(history, &id);
            (id, content, is_error)
        })
        .collect()
}

async fn records(test: &TestPod, id: Uuid) -> Vec<LogRecord> {
    test.config()
        .store()
        .read(id)
        .await
        .expect("child log")
        .records
}

fn items(records: &[LogRecord]) -> Vec<Item> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Item(item) => Some(item.clone()),
            _ => None,
        })
        .collect()
}

fn user_prompts(records: &[LogRecord]) -> usize {
    items(records)
        .iter()
        .filter(|i| matches!(i.kind, ItemKind::User { .. }))
        .count()
}

/// Tool names offered in the requests of the conversation whose first user
/// message contains `task` (the parent's: its own prompt).
fn tools_seen(model: &ScriptedProvider, task: &str) -> Vec<String> {
    let request = model
        .requests()
        .into_iter()
        .find(|r| {
            r.history.iter().find_map(|i| match &i.kind {
                ItemKind::User { text } => Some(text.contains(task)),
                _ => None,
            }) == Some(true)
        })
        .expect("a request of that conversation");
    request.tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn parallel_children_answer_with_their_final_message_and_plan() {
    let model = model(
        vec![
            ScriptStep::tool_call(TASK, task("alpha", "Explore alpha"))
                .and_call(TASK, task("beta", "Explore beta")),
            ScriptStep::text("Both explored."),
        ],
        vec![
            (
                "Explore alpha",
                vec![
                    crate::support::todo_step(&[("a1", "Look at alpha", "in_progress")]),
                    ScriptStep::tool_call("rendezvous", json!({})),
                    crate::support::todo_step(&[("a1", "Look at alpha", "completed")]),
                    ScriptStep::text("alpha has 3 modules"),
                ],
            ),
            (
                "Explore beta",
                vec![
                    ScriptStep::tool_call("rendezvous", json!({})),
                    ScriptStep::text("beta has 5 modules"),
                ],
            ),
        ],
    );
    let test = test_pod(model);
    let mut config = test.config();
    config.tools.register(Rendezvous::new(2));
    let pod = Pod::spawn(config).await.unwrap();
    let mut events = pod.subscribe();
    let outcome = tokio::time::timeout(DEADLOCK, pod.prompt("Explore the repo"))
        .await
        .expect("the two children met at the rendezvous: they ran at the same time")
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    let history = pod.get_history().await.unwrap();
    validate_history(&history).unwrap();
    let results = task_results(&history);
    assert_eq!(results.len(), 2);
    let (alpha_call, alpha, alpha_err) = &results[0];
    assert!(!alpha_err, "{alpha}");
    assert!(alpha.starts_with("alpha has 3 modules"), "{alpha}");
    assert!(alpha.contains("[x] a1: Look at alpha"), "the plan: {alpha}");
    let (beta_call, beta, beta_err) = &results[1];
    assert!(
        !beta_err && beta.starts_with("beta has 5 modules"),
        "{beta}"
    );

    // Each child is a session of its own, named after the parent's call.
    let parent = pod.session_id();
    for (call, text) in [(alpha_call, "Explore alpha"), (beta_call, "Explore beta")] {
        let child = child_session_id(parent, call);
        assert!(alpha.contains(&child.to_string()) || beta.contains(&child.to_string()));
        let contents = test.config().store().read(child).await.unwrap();
        let link = contents
            .header
            .unwrap()
            .parent
            .expect("the child names its parent");
        assert_eq!(
            (link.session_id, link.call_id.as_str(), link.depth),
            (parent, call.as_str(), 1)
        );
        let history = items(&contents.records);
        validate_history(&history).unwrap();
        assert!(matches!(&history[0].kind, ItemKind::User { text: t } if t == text));
    }
    // Children's events reach the parent's subscribers, tagged.
    let mut tagged = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let PodEvent::Subagent {
            session_id, inner, ..
        } = event
        {
            if let PodEvent::ToolCallFinished { name, .. } = *inner {
                tagged.push((session_id, name));
            }
        }
    }
    assert!(tagged.contains(&(child_session_id(parent, alpha_call), "todo_write".into())));
    assert!(tagged.contains(&(child_session_id(parent, beta_call), "rendezvous".into())));
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn children_nest_only_to_the_depth_limit() {
    let model = model(
        vec![
            ScriptStep::tool_call(TASK, task("child", "Level one")),
            ScriptStep::text("done"),
        ],
        vec![
            (
                "Level one",
                vec![
                    ScriptStep::tool_call(TASK, task("grandchild", "Level two")),
                    ScriptStep::text("level one done"),
                ],
            ),
            ("Level two", vec![ScriptStep::text("level two done")]),
        ],
    );
    let test = test_pod(model.clone());
    let pod = test.spawn().await;
    pod.prompt("Start").await.unwrap();
    // Depth 0 and 1 may delegate; depth 2 (the default limit) may not.
    assert!(tools_seen(&model, "Start").contains(&TASK.to_string()));
    assert!(tools_seen(&model, "Level one").contains(&TASK.to_string()));
    assert!(!tools_seen(&model, "Level two").contains(&TASK.to_string()));
    let history = pod.get_history().await.unwrap();
    let (call, result, is_error) = &task_results(&history)[0];
    assert!(
        !is_error && result.starts_with("level one done"),
        "{result}"
    );
    // The grandchild's id derives from the child's.
    let child = child_session_id(pod.session_id(), call);
    let child_history = items(&records(&test, child).await);
    let (grand_call, grand_result, _) = &task_results(&child_history)[0];
    assert!(grand_result.starts_with("level two done"), "{grand_result}");
    let grandchild = test
        .config()
        .store()
        .read(child_session_id(child, grand_call))
        .await
        .unwrap();
    assert_eq!(grandchild.header.unwrap().parent.unwrap().depth, 2);
    pod.shutdown().await.unwrap();

    // With a limit of 1, a child has no `task` tool at all.
    let model = self::model(
        vec![
            ScriptStep::tool_call(TASK, task("child", "Only child")),
            ScriptStep::text("ok"),
        ],
        vec![("Only child", vec![ScriptStep::text("alone")])],
    );
    let test = test_pod(model.clone());
    let mut config = test.config();
    config.subagents.max_depth = 1;
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("Go").await.unwrap();
    assert!(!tools_seen(&model, "Only child").contains(&TASK.to_string()));
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_child_asks_the_parents_approver_and_is_never_looser_than_its_parent() {
    let model = model(
        vec![
            ScriptStep::tool_call(TASK, task("writer", "Write the notes")),
            ScriptStep::tool_call(
                TASK,
                json!({"description": "reader", "prompt": "Read only please", "read_only": true}),
            ),
            ScriptStep::text("done"),
        ],
        vec![
            (
                "Write the notes",
                vec![
                    ScriptStep::tool_call(
                        "write_file",
                        json!({"path": "notes.md", "content": "n"}),
                    ),
                    ScriptStep::tool_call("bash", json!({"command": "echo hi"})),
                    ScriptStep::text("wrote notes"),
                ],
            ),
            ("Read only please", vec![ScriptStep::text("read")]),
        ],
    );
    let mut test = test_pod(model.clone());
    test.workspace_tools = true;
    let approver = ScriptedApprover::new([ApprovalDecision::AllowOnce]);
    let mut config = test.config();
    config.approval.set("bash", ToolPolicy::Deny);
    config.approver = Some(approver.clone());
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("Delegate").await.unwrap();

    // The write asked the parent's approver, labelled with the child.
    let asked = approver.requests.lock().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].tool, "write_file");
    let label = asked[0].subagent.clone().expect("labelled with the child");
    assert_eq!(label.description, "writer");
    let history = pod.get_history().await.unwrap();
    let results = task_results(&history);
    assert_eq!(
        label.session_id,
        child_session_id(pod.session_id(), &results[0].0)
    );
    assert!(test.dir.path().join("notes.md").exists());
    // The parent's deny holds in the child.
    let child = items(&records(&test, label.session_id).await);
    let bash = calls_of(&child)
        .into_iter()
        .find(|(_, n)| n == "bash")
        .unwrap();
    let (text, is_error) = result_of(&child, &bash.0);
    assert!(is_error && text.contains("denied"), "{text}");
    // A read-only child is not offered the tools that write.
    let tools = tools_seen(&model, "Read only please");
    for tool in ["write_file", "edit_file", "bash", "echo"] {
        assert!(!tools.contains(&tool.to_string()), "{tool} in {tools:?}");
    }
    assert!(tools.contains(&"read_file".to_string()));
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_children_and_every_history_stays_valid() {
    let model = model(
        vec![ScriptStep::tool_call(TASK, task("waiter", "Wait here"))],
        vec![(
            "Wait here",
            vec![ScriptStep::tool_call("wait_for_cancel", json!({}))],
        )],
    );
    let test = test_pod(model);
    let pod = test.spawn().await;
    let mut events = pod.subscribe();
    let turn = tokio::spawn({
        let pod = pod.clone();
        async move { pod.prompt("Start waiting").await }
    });
    let started = crate::support::wait_for_event(&mut events, |e| {
        matches!(e, PodEvent::Subagent { inner, .. }
            if matches!(**inner, PodEvent::ToolCallStarted { ref name, .. } if name == "wait_for_cancel"))
    })
    .await;
    let PodEvent::Subagent {
        session_id: child, ..
    } = started
    else {
        unreachable!()
    };
    pod.cancel().await.unwrap();
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Cancelled);
    let history = pod.get_history().await.unwrap();
    validate_history(&history).unwrap();
    let (_, result, is_error) = &task_results(&history)[0];
    assert!(*is_error && result.contains("cancelled"), "{result}");
    let child_history = items(&records(&test, child).await);
    validate_history(&child_history).unwrap();
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_child_is_an_error_result_and_the_parent_goes_on() {
    let model = model(
        vec![
            ScriptStep::tool_call(TASK, task("broken", "Break down")),
            ScriptStep::text("I will do it myself."),
        ],
        // The child's model fails on its first request.
        vec![(
            "Break down",
            vec![ScriptStep::http_error(400, "bad request")],
        )],
    );
    let test = test_pod(model);
    let pod = test.spawn().await;
    let outcome = pod.prompt("Delegate").await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    let history = pod.get_history().await.unwrap();
    validate_history(&history).unwrap();
    let (_, result, is_error) = &task_results(&history)[0];
    assert!(*is_error, "{result}");
    assert!(result.contains("bad request"), "{result}");
    assert!(matches!(&history.last().unwrap().kind,
        ItemKind::Assistant { text, .. } if text == "I will do it myself."));
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_run_cannot_start_more_children_than_its_cap() {
    let model = model(
        vec![
            ScriptStep::tool_call(TASK, task("one", "Task one"))
                .and_call(TASK, task("two", "Task two"))
                .and_call(TASK, task("three", "Task three")),
            ScriptStep::text("done"),
        ],
        vec![
            ("Task one", vec![ScriptStep::text("one")]),
            ("Task two", vec![ScriptStep::text("two")]),
            ("Task three", vec![ScriptStep::text("three")]),
        ],
    );
    let test = test_pod(model);
    let mut config = test.config();
    config.subagents.max_per_run = 2;
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("Go").await.unwrap();
    let results = task_results(&pod.get_history().await.unwrap());
    let refused: Vec<_> = results
        .iter()
        .filter(|(_, text, err)| *err && text.contains("limit"))
        .collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert_eq!(results.iter().filter(|(_, _, err)| !err).count(), 2);
    pod.shutdown().await.unwrap();
}

/// Runs `phase` on a runtime that is then dropped with its tasks, as a
/// SIGKILL would leave them: nothing is shut down, only what was committed
/// is in the logs.
fn crash_after<T: Send + 'static>(
    phase: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let value = runtime.block_on(phase);
    runtime.shutdown_background();
    value
}

fn crash_script() -> ScriptedProvider {
    model(
        vec![
            ScriptStep::tool_call(TASK, task("quick", "Quick task"))
                .and_call(TASK, task("long", "Long task")),
            ScriptStep::text("Both children reported."),
        ],
        vec![
            ("Quick task", vec![ScriptStep::text("quick answer")]),
            (
                "Long task",
                vec![
                    crate::support::todo_step(&[
                        ("l1", "First half", "completed"),
                        ("l2", "Second half", "in_progress"),
                    ]),
                    // The crash comes while this call runs.
                    ScriptStep::tool_call("wait_for_cancel", json!({})),
                    crate::support::todo_step(&[
                        ("l1", "First half", "completed"),
                        ("l2", "Second half", "completed"),
                    ]),
                    ScriptStep::text("long answer"),
                ],
            ),
        ],
    )
}

#[test]
fn after_a_crash_the_parent_resumes_its_children_instead_of_starting_them_over() {
    let test = test_pod(crash_script());
    let config = test.config();
    // Phase 1: the quick child finishes, the long one is mid-task, and the
    // parent has committed neither result when the process dies.
    let (parent, quick, long) = crash_after(async move {
        let pod = Pod::spawn(config).await.unwrap();
        let mut events = pod.subscribe();
        let turn = pod.clone();
        tokio::spawn(async move { turn.prompt("Run both").await });
        let (mut quick, mut long) = (None, None);
        while quick.is_none() || long.is_none() {
            if let Ok(PodEvent::Subagent {
                session_id,
                description,
                inner,
                ..
            }) = events.recv().await
            {
                match (description.as_str(), *inner) {
                    ("quick", PodEvent::TurnEnded { .. }) => quick = Some(session_id),
                    ("long", PodEvent::ToolCallStarted { name, .. })
                        if name == "wait_for_cancel" =>
                    {
                        long = Some(session_id)
                    }
                    _ => {}
                }
            }
        }
        let parent = pod.session_id();
        std::mem::forget(pod);
        (parent, quick.unwrap(), long.unwrap())
    });

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let quick_before = records(&test, quick).await;
        let long_before = records(&test, long).await;
        assert_eq!(user_prompts(&long_before), 1);
        // The parent's log holds both calls and no result.
        let parent_items = items(&records(&test, parent).await);
        assert_eq!(calls_of(&parent_items).len(), 2);
        assert!(!parent_items
            .iter()
            .any(|i| matches!(i.kind, ItemKind::ToolResult { .. })));

        // A fresh model, as after a restart: it goes on from the logs.
        let model = crash_script();
        model.skip_to(1);
        let mut config = test.config();
        config.provider = Arc::new(model.clone());
        let pod = Pod::resume(parent, config).await.unwrap();
        let outcome = pod.continue_turn().await.unwrap();
        assert_eq!(outcome.reason, TurnEndReason::EndTurn);

        let history = pod.get_history().await.unwrap();
        validate_history(&history).unwrap();
        let results = task_results(&history);
        let quick_result = &results[0];
        let long_result = &results[1];
        assert!(
            quick_result.1.starts_with("quick answer"),
            "{quick_result:?}"
        );
        assert!(long_result.1.starts_with("long answer"), "{long_result:?}");
        assert!(
            long_result.1.contains("[x] l2: Second half"),
            "{long_result:?}"
        );

        // The finished child gave its recorded answer without running again.
        assert_eq!(records(&test, quick).await, quick_before);
        let quick_requests = model.requests().into_iter().filter(
            |r| matches!(&r.history[0].kind, ItemKind::User { text } if text == "Quick task"),
        );
        assert_eq!(quick_requests.count(), 0);
        // The long child went on from its log: one prompt, its first steps
        // kept, its interrupted call closed, and it finished its plan.
        let long_after = records(&test, long).await;
        assert_eq!(user_prompts(&long_after), 1, "never started over");
        assert_eq!(&long_after[..long_before.len()], &long_before[..]);
        let long_items = items(&long_after);
        validate_history(&long_items).unwrap();
        assert!(long_items.iter().any(|i| matches!(&i.kind,
            ItemKind::ToolResult { content, .. } if content.starts_with("Interrupted"))));
        pod.shutdown().await.unwrap();
    });
}

#[tokio::test]
async fn a_read_only_childs_children_are_read_only_and_children_share_no_tool_state() {
    let model = model(
        vec![
            ScriptStep::tool_call(
                TASK,
                json!({"description": "reader", "prompt": "Read and delegate", "read_only": true}),
            ),
            ScriptStep::tool_call(TASK, task("writer", "Plain child")),
            ScriptStep::text("done"),
        ],
        vec![
            (
                "Read and delegate",
                vec![
                    ScriptStep::tool_call(TASK, task("deeper", "Grandchild task")),
                    ScriptStep::text("delegated"),
                ],
            ),
            ("Grandchild task", vec![ScriptStep::text("deep")]),
            ("Plain child", vec![ScriptStep::text("plain")]),
        ],
    );
    let mut test = test_pod(model.clone());
    test.workspace_tools = true;
    let mut config = test.config();
    config
        .tools
        .register(pod_testkit::tools::Tally(Default::default()));
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("Go").await.unwrap();
    // The grandchild of a read-only child asked for nothing, yet is
    // read-only: it inherits its parent's restriction.
    let deep = tools_seen(&model, "Grandchild task");
    assert!(deep.contains(&"read_file".to_string()), "{deep:?}");
    for tool in ["write_file", "edit_file", "bash"] {
        assert!(!deep.contains(&tool.to_string()), "{tool} in {deep:?}");
    }
    // A child that may write gets the embedder's stateless tools, not the
    // stateful `tally`, whose one state is its parent's.
    let plain = tools_seen(&model, "Plain child");
    assert!(plain.contains(&"echo".to_string()) && plain.contains(&"write_file".to_string()));
    assert!(!plain.contains(&"tally".to_string()), "{plain:?}");
    assert!(tools_seen(&model, "Go").contains(&"tally".to_string()));
    // The subagent note is in a grandchild's system prompt once.
    let request = model
        .requests()
        .into_iter()
        .find(
            |r| matches!(&r.history[0].kind, ItemKind::User { text } if text == "Grandchild task"),
        )
        .unwrap();
    assert_eq!(
        request.system_prompt.matches("You are a subagent").count(),
        1
    );
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_typed_child_gets_its_prompt_and_only_the_tools_both_it_and_its_parent_may_use() {
    let model = model(
        vec![
            ScriptStep::tool_call(
                TASK,
                json!({"description": "r", "prompt": "Typed child", "subagent_type": "reader"}),
            ),
            ScriptStep::tool_call(
                TASK,
                json!({"description": "x", "prompt": "Nobody", "subagent_type": "nope"}),
            ),
            ScriptStep::text("done"),
        ],
        vec![("Typed child", vec![ScriptStep::text("read")])],
    );
    let mut test = test_pod(model.clone());
    test.workspace_tools = true;
    let mut config = test.config();
    // The parent may not run bash; the agent may not grep.
    config.tool_allow = Some(vec!["read_file".into(), "grep".into(), TASK.into()]);
    config.subagents.types = vec![pod::SubagentType {
        name: "reader".into(),
        description: "Reads".into(),
        prompt: "READER-PROMPT".into(),
        tools: Some(vec!["read_file".into(), "bash".into()]),
        provider: None,
    }];
    let pod = Pod::spawn(config).await.unwrap();
    pod.prompt("Go").await.unwrap();
    let mut seen = tools_seen(&model, "Typed child");
    seen.sort();
    assert_eq!(seen, ["read_file", "todo_write"]);
    let mut parent = tools_seen(&model, "Go");
    parent.sort();
    assert_eq!(parent, ["grep", "read_file", TASK, "todo_write"]);
    let request = model
        .requests()
        .into_iter()
        .find(|r| matches!(&r.history[0].kind, ItemKind::User { text } if text == "Typed child"))
        .unwrap();
    assert!(request.system_prompt.contains("READER-PROMPT"));
    // An unknown type is an error result naming the known ones.
    let history = pod.get_history().await.unwrap();
    let results = task_results(&history);
    assert!(!results[0].2, "{results:?}");
    assert!(
        results[1].2
            && results[1].1.contains("no agent type `nope`")
            && results[1].1.contains("reader")
    );
    pod.shutdown().await.unwrap();
}
