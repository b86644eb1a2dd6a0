import AppleCodeCore
import Testing
@testable import AppleCodePlan

@Suite struct PlanRunnerTests {
    @Test func threeSubtasksRunInFreshWindowsAndCombine() async throws {
        let longResult = "Fixed greet() in a.py by correcting the spelling of the greeting text. "
            + String(repeating: "More detail that a later worker must not see. ", count: 5) + "SECRET-TAIL"
        let backend = ScriptedBackend([
            answer(#"["Fix a.py", "Fix b.py", "Fix c.py"]"#, turns: 2, input: 300, output: 20),
            answer(longResult, turns: 3, files: ["a.py"], commands: 1),
            answer("Renamed foo to bar in b.py.", turns: 2, files: ["b.py"]),
            answer("Added a docstring to c.py.", turns: 2, files: ["c.py", "a.py"], commands: 2),
            answer("All three modules were fixed.", turns: 1, input: 200, output: 15),
        ])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(), events: events)

        let requests = backend.requests
        try #require(requests.count == 5)  // indexed below: a short run must fail the test, not crash the suite
        // Planner: the task, read-only tools only, a quarter of the turns.
        #expect(requests[0].prompt.contains("Fix the three modules"))
        #expect(requests[0].prompt.contains("at most 5 subtasks"))
        #expect(Set(requests[0].tools.map(\.name)) == ["readFile", "listDirectory", "searchFiles", "searchContent"])
        #expect(requests[0].maxTurns == 4)
        // Workers: task + own subtask + digest of earlier workers, never their transcripts; all tools.
        #expect(requests[1].prompt.contains("Your subtask: Fix a.py"))
        #expect(!requests[1].prompt.contains("Earlier subtasks"))
        #expect(requests[2].prompt.contains("Your subtask: Fix b.py"))
        #expect(requests[2].prompt.contains("1. Fix a.py: Fixed greet() in a.py"))
        #expect(requests[2].prompt.contains("(changed: a.py)"))
        #expect(!requests[2].prompt.contains("SECRET-TAIL"))
        #expect(requests[3].prompt.contains("2. Fix b.py: Renamed foo to bar in b.py. (changed: b.py)"))
        for worker in requests[1...3] {
            #expect(worker.prompt.contains("Task: Fix the three modules"))
            #expect(worker.tools.count == allToolNames.count)
            #expect(worker.contextTokens == 4096)
            #expect(worker.instructions == "You are a coding agent.")
        }
        // Turn shares: 16 - 2 (planner) - 1 (summary) = 13 over 3 workers, then what is left over the rest; the
        // summary's turn is kept back, so planner + workers + summary stay within --max-turns 16.
        #expect(requests[1].maxTurns == 4)
        #expect(requests[2].maxTurns == (16 - 5 - 1) / 2)
        #expect(requests[3].maxTurns == 16 - 7 - 1)
        // Summary: one request, no tools, the digests.
        #expect(requests[4].tools.isEmpty)
        #expect(requests[4].maxTurns == 1)
        #expect(requests[4].prompt.contains("3. Fix c.py: Added a docstring to c.py. (changed: c.py, a.py)"))

        let text = result.text
        let a = try #require(text.range(of: "1. Fix a.py\n" + longResult))
        let b = try #require(text.range(of: "2. Fix b.py\nRenamed foo to bar in b.py."))
        let c = try #require(text.range(of: "3. Fix c.py\nAdded a docstring to c.py."))
        let s = try #require(text.range(of: "Summary: All three modules were fixed."))
        #expect(a.lowerBound < b.lowerBound && b.lowerBound < c.lowerBound && c.lowerBound < s.lowerBound)

        #expect(result.progress.filesChanged == ["a.py", "b.py", "c.py"])
        #expect(result.progress.commandsRun == 3)
        #expect(result.progress.turns == 2 + 3 + 2 + 2 + 1)
        #expect(result.progress.usage.inputTokens == 300 + 3 * 100 + 200)
        #expect(result.progress.usage.outputTokens == 20 + 3 * 10 + 15)

        // The untagged text stream is exactly the combined answer; plan and subtask starts are announced.
        #expect(events.texts.map(\.delta) == [text])
        #expect(events.texts.allSatisfy { $0.subtask == nil })
        #expect(events.notices.contains { $0.hasPrefix("plan: 3 subtasks: 1. Fix a.py | 2. Fix b.py") })
        let tagged = events.events.compactMap(\.subtask)
        #expect(tagged == [1, 2, 3])
    }

    @Test func workerEventsCarryTheirSubtaskId() async throws {
        let emitting: ScriptedBackend.Step = { request, events in
            events.emit(.toolCall(id: "c1", name: "readFile", arguments: ["path": "a.py"]))
            events.emit(.text(delta: "worker text"))
            return AgentAnswer(text: "done", progress: RunProgress(turns: 1))
        }
        let planner: ScriptedBackend.Step = { _, events in
            events.emit(.text(delta: #"["one", "two"]"#))
            events.emit(.toolCall(id: "p1", name: "listDirectory", arguments: [:]))
            return AgentAnswer(text: #"["one", "two"]"#, progress: RunProgress(turns: 1))
        }
        let backend = ScriptedBackend([planner, emitting, emitting, answer("ok")])
        let events = EventLog()
        _ = try await PlanRunner(backend: backend).run(makeRequest(), events: events)
        let calls = events.events.compactMap { event -> (Int?, String)? in
            if case .toolCall(let id, _, _) = event.kind { (event.subtask, id) } else { nil }
        }
        #expect(calls.map(\.0) == [nil, 1, 2])
        #expect(events.texts.map(\.subtask) == [1, 2, nil])
        #expect(!events.texts.contains { $0.delta.contains("[\"one\"") })
    }

    @Test func garbagePlanRunsTheTaskDirectly() async throws {
        let backend = ScriptedBackend([
            answer("I am not sure what you mean.", turns: 1, input: 50),
            answer("Did it directly.", turns: 3, files: ["x.py"], input: 70),
        ])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(), events: events)
        #expect(backend.requests.count == 2)
        #expect(backend.requests[1].prompt == "Fix the three modules")
        #expect(backend.requests[1].tools.count == allToolNames.count)
        #expect(backend.requests[1].maxTurns == 15)
        #expect(result.text == "Did it directly.")
        #expect(result.progress.turns == 4)
        #expect(result.progress.usage.inputTokens == 120)
        #expect(result.progress.filesChanged == ["x.py"])
        #expect(events.notices.contains("plan: the planner's reply held no subtasks; running the task directly"))
    }

    /// Small models answered the planner with the prompt's own example: that is no plan.
    @Test func thePromptsExampleCopiedAsThePlanRunsTheTaskDirectly() async throws {
        let copied = JSONValue.array(PlanPrompts.exampleSubtasks.map { .string($0) }).jsonText
        let backend = ScriptedBackend([answer(copied, turns: 1, input: 50), answer("Did it directly.", turns: 2)])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(), events: events)
        #expect(result.text == "Did it directly.")
        #expect(backend.requests[1].prompt == "Fix the three modules")
        #expect(events.notices.contains("plan: the planner's reply held no subtasks; running the task directly"))
    }

    @Test func plannerBackendErrorFallsBackButUnavailableModelStops() async throws {
        let fallback = ScriptedBackend([failure(.maxTurns, "kept calling tools"), answer("direct")])
        let events = EventLog()
        let result = try await PlanRunner(backend: fallback).run(makeRequest(), events: events)
        #expect(result.text == "direct")
        #expect(events.notices.contains { $0.contains("the planner failed (error_max_turns") })

        let unavailable = ScriptedBackend([failure(.modelUnavailable, "Apple Intelligence is off")])
        let error = await #expect(throws: AgentError.self) {
            _ = try await PlanRunner(backend: unavailable).run(makeRequest(), events: EventLog())
        }
        #expect(error?.outcome == .modelUnavailable)
        #expect(unavailable.requests.count == 1)
    }

    @Test func aPlannerOutOfItsTimeShareFallsBackButOutOfTheRunsTimeStops() async throws {
        let honoursDeadline: ScriptedBackend.Step = { request, _ in
            let end = try #require(request.deadline)
            try await Task.sleep(until: end, clock: .continuous)
            throw AgentError(.timeout, "timed out", progress: RunProgress(turns: 1))
        }
        // Its quarter of 40 s runs out: the task runs directly in the time left (30 s: on a machine loaded enough
        // that the other suites hold both cores, the tests' own steps have waited over 12 s for a thread).
        let share = ScriptedBackend([honoursDeadline, answer("direct")])
        let events = EventLog()
        // The backend's own timeout is under test, not the watchdog's: on a loaded machine (parallel tests on two
        // cores) the watchdog, 2 s after the same deadline, could be resumed first and drop the planner's progress.
        var runner = PlanRunner(backend: share)
        runner.watchdogGrace = .seconds(60)
        let result = try await runner.run(makeRequest(deadline: .now + .seconds(40)), events: events)
        #expect(result.text == "direct")
        #expect(result.progress.turns == 2)
        #expect(events.notices.contains { $0.hasPrefix("plan: the planner failed (error_timeout") })

        // The run's own time is gone (the CLI cancels the run at --timeout): no direct run, a timeout.
        let deadline = ContinuousClock.now + .seconds(5)
        let hangs: ScriptedBackend.Step = { _, _ in
            try await Task.sleep(for: .seconds(30))
            return AgentAnswer(text: "never", progress: RunProgress())
        }
        let out = ScriptedBackend([hangs, answer("direct")])
        var outRunner = PlanRunner(backend: out)
        outRunner.watchdogGrace = .seconds(60)  // the CLI's cancel is under test: the watchdog must not come first
        let run = Task { [outRunner] in try await outRunner.run(makeRequest(deadline: deadline), events: EventLog()) }
        // Cancelled once the planner runs (polled: a busy machine may start the run late) and its time is gone.
        for _ in 0..<6000 where out.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(until: deadline + .milliseconds(200), clock: .continuous)
        run.cancel()
        let error = await #expect(throws: AgentError.self) { _ = try await run.value }
        #expect(error?.outcome == .timeout)
        #expect(out.requests.count == 1)
    }

    @Test func aLongTaskIsCutToAShareOfTheWindowInEveryPrompt() async throws {
        let longTask = "Refactor everything. " + String(repeating: "Lots of detail about the code base. ", count: 2000)
        let backend = ScriptedBackend([answer(#"["a", "b"]"#), answer("did a"), answer("did b"), answer("sum")])
        _ = try await PlanRunner(backend: backend).run(makeRequest(longTask), events: EventLog())
        for sent in backend.requests {
            #expect(TokenEstimator.estimate(sent.prompt) < 4096 / 4 + 400)
            #expect(sent.prompt.contains("Refactor everything."))
            #expect(sent.prompt.contains("cut to fit the context budget"))
        }
    }

    @Test func failingWorkerIsReportedAndTheRunContinues() async throws {
        let backend = ScriptedBackend([
            answer(#"["Fix a.py", "Fix b.py", "Fix c.py"]"#),
            answer("Fixed a.py.", files: ["a.py"]),
            failure(.maxTurns, "ran out of turns", partial: "half of b.py", turns: 4, files: ["b.py"]),
            answer("Fixed c.py.", files: ["c.py"]),
            answer("Two of three done; b.py failed."),
        ])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(), events: events)
        try #require(backend.requests.count == 5)
        #expect(backend.requests[3].prompt.contains("2. Fix b.py: FAILED (error_max_turns): ran out of turns"))
        #expect(backend.requests[4].prompt.contains("FAILED (error_max_turns)"))
        #expect(result.text.contains("2. Fix b.py\nFAILED (error_max_turns): ran out of turns\nPartial: half of b.py"))
        #expect(result.text.contains("3. Fix c.py\nFixed c.py."))
        #expect(result.text.hasSuffix("Summary: Two of three done; b.py failed."))
        #expect(result.progress.filesChanged == ["a.py", "b.py", "c.py"])
        #expect(result.progress.turns == 1 + 1 + 4 + 1 + 1)
        #expect(events.notices.contains("subtask 2 failed (error_max_turns): ran out of turns; continuing"))
    }

    @Test func allWorkersFailingFailsTheRun() async throws {
        let backend = ScriptedBackend([
            answer(#"["a", "b"]"#), failure(.backendError, "HTTP 500"), failure(.backendError, "HTTP 500"),
        ])
        let error = await #expect(throws: AgentError.self) {
            _ = try await PlanRunner(backend: backend).run(makeRequest(), events: EventLog())
        }
        #expect(error?.outcome == .backendError)
        #expect(error?.partialAnswer.contains("1. a\nFAILED (error_backend): HTTP 500") == true)
        #expect(backend.requests.count == 3)  // no summary request
    }

    @Test(arguments: [(RunOutcome.maxTurns, RunOutcome.maxTurns), (.timeout, .backendError), (.guardrail, .guardrail)])
    func allWorkersFailingForOneReasonReportsIt(failed: RunOutcome, reported: RunOutcome) async throws {
        let backend = ScriptedBackend([answer(#"["a", "b"]"#), failure(failed, "no"), failure(failed, "no")])
        let error = await #expect(throws: AgentError.self) {
            _ = try await PlanRunner(backend: backend).run(makeRequest(deadline: .now + .seconds(30)),
                                                           events: EventLog())
        }
        #expect(error?.outcome == reported)
    }

    @Test func maxSubtasksIsClampedAndExtraSubtasksAreMerged() async throws {
        #expect(PlanRunner(backend: ScriptedBackend([]), maxSubtasks: 0).maxSubtasks == 1)
        #expect(PlanRunner(backend: ScriptedBackend([]), maxSubtasks: -3).maxSubtasks == 1)
        #expect(PlanRunner(backend: ScriptedBackend([]), maxSubtasks: 50).maxSubtasks == 20)
        #expect(PlanRunner(backend: ScriptedBackend([]), maxSubtasks: 7).maxSubtasks == 7)

        let backend = ScriptedBackend([
            answer(#"["a", "b", "c", "d", "e"]"#), answer("did a"), answer("did b"), answer("did c, d, e"),
            answer("summary"),
        ])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend, maxSubtasks: 3).run(makeRequest(), events: events)
        try #require(backend.requests.count == 5)
        #expect(backend.requests[0].prompt.contains("at most 3 subtasks"))
        #expect(backend.requests[3].prompt.contains("Your subtask: c; then d; then e"))
        #expect(result.text.hasPrefix("Plan: 3 subtasks."))
        #expect(events.notices.contains {
            $0 == "plan: the planner gave 5 subtasks; the last 3 were merged into one (--max-subtasks 3)"
        })

        let twenty = ScriptedBackend([answer("[" + (1...25).map { "\"s\($0)\"" }.joined(separator: ",") + "]")])
        _ = try await PlanRunner(backend: twenty, maxSubtasks: 100).run(makeRequest(maxTurns: 40), events: EventLog())
        try #require(twenty.requests.count == 1 + 20 + 1)
        #expect(twenty.requests[20].prompt.contains("Your subtask: s20; then s21"))
    }

    // Deadlines in these tests are tens of seconds: the suite runs in parallel with the others on two cores, and
    // under load (load average 20) the steps before the one under test waited over 12 s for a thread.
    @Test func timeoutInTheMiddleOfAWorkerReportsThePartialCombinedAnswer() async throws {
        // 30 s: the run must reach the second worker before its deadline even when the machine stalls for seconds.
        let deadline = ContinuousClock.now + .seconds(30)
        let hangsUntilTheRunsDeadline: ScriptedBackend.Step = { _, _ in
            try await Task.sleep(until: deadline, clock: .continuous)
            throw AgentError(.timeout, "timed out", partialAnswer: "b.py half edited",
                             progress: RunProgress(turns: 2, filesChanged: ["b.py"]))
        }
        let backend = ScriptedBackend([
            answer(#"["Fix a.py", "Fix b.py", "Fix c.py"]"#), answer("Fixed a.py.", files: ["a.py"]),
            hangsUntilTheRunsDeadline,
        ])
        var runner = PlanRunner(backend: backend)
        runner.watchdogGrace = .seconds(60)  // longer than the worker's share: the run's own deadline comes first
        let error = await #expect(throws: AgentError.self) {
            _ = try await runner.run(makeRequest(deadline: deadline), events: EventLog())
        }
        let failure = try #require(error)
        #expect(failure.outcome == .timeout)
        #expect(failure.outcome.exitCode == 124)
        #expect(failure.message == "the run timed out during subtask 2 of 3")
        #expect(failure.partialAnswer.contains("1. Fix a.py\nFixed a.py."))
        #expect(failure.partialAnswer.contains("2. Fix b.py\nFAILED (error_timeout): timed out\nPartial: b.py half edited"))
        #expect(failure.partialAnswer.contains("3. Fix c.py\n(not started)"))
        #expect(!failure.partialAnswer.contains("Summary:"))
        #expect(failure.progress.filesChanged == ["a.py", "b.py"])
        try #require(backend.requests.count == 3)
        // Each worker got a share of the time left, not all of it.
        let workerDeadline = try #require(backend.requests[1].deadline)
        #expect(workerDeadline < deadline)
    }

    @Test func workersShareTheTimeLeftAndTheLastMayUseAllOfIt() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        let honoursDeadline: ScriptedBackend.Step = { request, _ in
            let end = try #require(request.deadline)
            try await Task.sleep(until: min(end, .now + .milliseconds(300)), clock: .continuous)
            if ContinuousClock.now >= end {
                throw AgentError(.timeout, "timed out", partialAnswer: "c.py partly read",
                                 progress: RunProgress(turns: 1))
            }
            return AgentAnswer(text: "slow but done", progress: RunProgress(turns: 1))
        }
        let backend = ScriptedBackend([
            answer(#"["a", "b", "c"]"#), answer("did a"), honoursDeadline, honoursDeadline, answer("summary"),
        ])
        let started = ContinuousClock.now
        _ = try await PlanRunner(backend: backend).run(makeRequest(deadline: deadline), events: EventLog())
        try #require(backend.requests.count == 5)
        let planner = try #require(backend.requests[0].deadline)
        let first = try #require(backend.requests[1].deadline)
        let last = try #require(backend.requests[3].deadline)
        // A quarter of 60 s for the planner, a third of what is left for the first worker: about 20 s, and far
        // from all of it. Each share is counted from when it is given, so the slack is for the seconds a loaded
        // machine may take between the start and the planner, and the planner's own time.
        #expect(planner - started <= .seconds(20))
        #expect(first - started <= .seconds(35))
        #expect(first - started >= .seconds(19))
        #expect(last == deadline)
        #expect(backend.requests[4].deadline == deadline)
    }

    @Test func theRunTimesOutInTheLastWorkerThatHonoursItsDeadline() async throws {
        // 30 s: subtask 2's share (half of what is left) must run out well before the run's own deadline.
        let deadline = ContinuousClock.now + .seconds(30)
        let honoursDeadline: ScriptedBackend.Step = { request, _ in
            let end = try #require(request.deadline)
            try await Task.sleep(until: end, clock: .continuous)
            throw AgentError(.timeout, "timed out", partialAnswer: "partly done", progress: RunProgress(turns: 1))
        }
        let backend = ScriptedBackend([answer(#"["a", "b", "c"]"#), answer("did a"), honoursDeadline, honoursDeadline])
        var runner = PlanRunner(backend: backend)
        runner.watchdogGrace = .seconds(60)  // the workers' own timeouts are under test (see the time-share test)
        let error = await #expect(throws: AgentError.self) {
            _ = try await runner.run(makeRequest(deadline: deadline), events: EventLog())
        }
        let failure = try #require(error)
        #expect(failure.outcome == .timeout)
        #expect(failure.message == "the run timed out during subtask 3 of 3")
        // Subtask 2 ran out of its own share and failed alone; subtask 3 ran into the run's deadline.
        #expect(failure.partialAnswer.contains("1. a\ndid a\n\n2. b\nFAILED (error_timeout): timed out"))
        #expect(failure.partialAnswer.contains("3. c\nFAILED (error_timeout): timed out\nPartial: partly done"))
        #expect(backend.requests.count == 4)
        #expect(failure.progress.turns == 1 + 1 + 1 + 1)
    }

    @Test func aWorkerThatIgnoresItsDeadlineIsCancelled() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        let hangs: ScriptedBackend.Step = { _, _ in
            try await Task.sleep(for: .seconds(3600))
            return AgentAnswer(text: "never", progress: RunProgress())
        }
        let backend = ScriptedBackend([answer(#"["only"]"#), hangs])
        var runner = PlanRunner(backend: backend)
        runner.watchdogGrace = .milliseconds(500)
        let started = ContinuousClock.now
        let error = await #expect(throws: AgentError.self) {
            _ = try await runner.run(makeRequest(deadline: deadline), events: EventLog())
        }
        #expect(error?.outcome == .timeout)
        #expect(error?.partialAnswer.contains("1. only\nFAILED (error_timeout)") == true)
        #expect(ContinuousClock.now - started < .seconds(600))  // the worker would sleep an hour
    }

    @Test(arguments: [true, false])
    func cancellingTheRunIsATimeoutOnlyOnceTheDeadlinePassed(atDeadline: Bool) async throws {
        // The CLI cancels the run when --timeout expires or a signal arrives; the worker's backend then stops.
        let deadline = ContinuousClock.now + .seconds(atDeadline ? 30 : 60)
        let stopsWhenCancelled: ScriptedBackend.Step = { _, _ in
            try await Task.sleep(for: .seconds(30))
            return AgentAnswer(text: "never", progress: RunProgress())
        }
        let backend = ScriptedBackend([answer(#"["a", "b"]"#), answer("did a"), stopsWhenCancelled])
        var runner = PlanRunner(backend: backend)
        runner.watchdogGrace = .seconds(60)  // the CLI's cancel is under test (see the time-share test)
        let run = Task { [runner] in try await runner.run(makeRequest(deadline: deadline), events: EventLog()) }
        // Cancelled once subtask 2 runs (polled: a fixed pause was sometimes too short on a loaded machine), and
        // for the timeout case after the deadline.
        for _ in 0..<3000 where backend.requests.count < 3 { try await Task.sleep(for: .milliseconds(10)) }
        if atDeadline { try await Task.sleep(until: deadline + .milliseconds(300), clock: .continuous) }
        run.cancel()
        let error = await #expect(throws: AgentError.self) { _ = try await run.value }
        let failure = try #require(error)
        #expect(failure.outcome == (atDeadline ? .timeout : .interrupted))
        #expect(failure.partialAnswer.contains("1. a\ndid a"))
        #expect(failure.partialAnswer.contains(atDeadline ? "2. b\nFAILED (error_timeout): the run timed out"
                                                            : "2. b\nFAILED (error_interrupted)"))
    }

    @Test func aWorkerOutOfItsTimeShareFailsAloneWhileTheRunHasTime() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        let backend = ScriptedBackend([
            answer(#"["a", "b"]"#), failure(.timeout, "its share ran out"), answer("did b"), answer("summary"),
        ])
        let result = try await PlanRunner(backend: backend).run(makeRequest(deadline: deadline), events: EventLog())
        #expect(result.text.contains("1. a\nFAILED (error_timeout): its share ran out"))
        #expect(result.text.contains("2. b\ndid b"))
    }

    @Test func parallelRunsReadOnlyWorkersAtOnce() async throws {
        let gate = Rendezvous(parties: 3)
        let meets: ScriptedBackend.Step = { request, _ in
            await gate.arrive()
            return AgentAnswer(text: "read " + request.prompt.split(separator: "\n").last.map(String.init)!,
                               progress: RunProgress(turns: 1))
        }
        let backend = ScriptedBackend([answer(#"["x", "y", "z"]"#), meets, meets, meets, answer("summary")])
        let readOnly = ["readFile", "listDirectory", "searchFiles", "searchContent"]
        let result = try await PlanRunner(backend: backend, parallel: true)
            .run(makeRequest(tools: readOnly), events: EventLog())
        // All three were in flight together (the rendezvous only opens for three), and none saw a digest.
        #expect(backend.requests[1...3].allSatisfy { !$0.prompt.contains("Earlier subtasks") })
        #expect(result.text.contains("Summary: summary"))
        #expect(result.progress.turns == 1 + 3 + 1)
    }

    @Test func parallelIsRefusedWhenWorkersCanWrite() async throws {
        let backend = ScriptedBackend([answer(#"["x", "y"]"#), answer("did x"), answer("did y"), answer("sum")])
        let events = EventLog()
        _ = try await PlanRunner(backend: backend, parallel: true).run(makeRequest(), events: events)
        #expect(events.notices.contains("plan: --parallel needs a read-only run; workers run one at a time"))
        #expect(backend.requests[2].prompt.contains("1. x: did x"))
    }

    @Test func summaryFailureLeavesTheResultsStanding() async throws {
        let backend = ScriptedBackend([answer(#"["x"]"#), answer("did x"), failure(.backendError, "HTTP 503")])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(), events: events)
        #expect(result.text == "Plan: 1 subtask.\n\n1. x\ndid x")
        #expect(events.notices.contains("plan: the summary request failed (error_backend: HTTP 503)"))
    }
}

/// Opens when `parties` callers have arrived: proves that parallel workers were in flight at the same time.
actor Rendezvous {
    let parties: Int
    private var arrived = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    init(parties: Int) { self.parties = parties }
    func arrive() async {
        arrived += 1
        if arrived == parties {
            waiting.forEach { $0.resume() }
            waiting = []
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}
