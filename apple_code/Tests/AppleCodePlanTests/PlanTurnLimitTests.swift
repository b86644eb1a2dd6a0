import AppleCodeCore
import Testing
@testable import AppleCodePlan

/// `--max-turns N` bounds every model request of a plan run: planner, workers and summary together.
@Suite struct PlanTurnLimitTests {
    static let fiveSubtasks = #"["a", "b", "c", "d", "e"]"#

    /// The worst case: a run that uses every turn it is given (one request per turn), as a backend that honours
    /// `maxTurns` may; a share of 0 stops before any request, like the agent loop.
    static func spendsAllItsTurns(_ text: String) -> ScriptedBackend.Step {
        { request, _ in
            guard request.maxTurns > 0 else { throw AgentError(.maxTurns, "no turn left") }
            return AgentAnswer(text: text, progress: RunProgress(turns: request.maxTurns))
        }
    }

    @Test(arguments: [2, 3, 4, 5, 6, 8, 16])
    func aFiveSubtaskPlanNeverExceedsMaxTurns(maxTurns: Int) async throws {
        let steps = [Self.spendsAllItsTurns(Self.fiveSubtasks)] + (1...6).map { Self.spendsAllItsTurns("did \($0)") }
        let backend = ScriptedBackend(steps)
        let result = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: maxTurns), events: EventLog())

        // Each backend run used exactly the turns it was granted, so these sums are the model requests made.
        #expect(backend.requests.count <= maxTurns)
        #expect(backend.requests.map(\.maxTurns).reduce(0, +) <= maxTurns)
        #expect(backend.requests.allSatisfy { $0.maxTurns >= 1 })
        #expect(result.progress.turns <= maxTurns)
    }

    @Test func twoTurnsAreTooFewForAPlanSoTheTaskRunsDirectly() async throws {
        let backend = ScriptedBackend([answer("did it directly"), answer("never asked")])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: 2), events: events)
        #expect(backend.requests.count == 1)
        #expect(backend.requests[0].prompt == "Fix the three modules")
        #expect(backend.requests[0].tools.count == allToolNames.count)
        #expect(backend.requests[0].maxTurns == 2)
        #expect(result.text == "did it directly")
        #expect(events.notices.contains(
            "plan: --max-turns 2 is too few for a plan (the planner, one worker and the summary need 3); "
                + "running the task directly"))
    }

    @Test func threeTurnsMakeOnePlannerOneWorkerAndTheSummary() async throws {
        let backend = ScriptedBackend([answer(Self.fiveSubtasks), answer("did all five"), answer("summary")])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: 3), events: events)
        let requests = backend.requests
        #expect(requests.count == 3)
        #expect(requests[0].prompt.contains("at most 1 subtask."))
        #expect(requests.map(\.maxTurns) == [1, 1, 1])
        #expect(requests[1].prompt.contains("Your subtask: a; then b; then c; then d; then e"))
        #expect(requests[2].tools.isEmpty)
        #expect(result.text.hasPrefix("Plan: 1 subtask."))
        #expect(result.text.hasSuffix("Summary: summary"))
        #expect(events.notices.contains(
            "plan: the planner gave 5 subtasks; the last 5 were merged into one "
                + "(--max-turns 3 pays for 1 worker after 1 planner turn and the summary's 1)"))
    }

    @Test func fourTurnsMakeTwoWorkersTheLastTakingTheRest() async throws {
        let backend = ScriptedBackend([answer(Self.fiveSubtasks), answer("did a"), answer("did the rest"),
                                       answer("summary")])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: 4), events: events)
        let requests = backend.requests
        #expect(requests.count == 4)
        #expect(requests[0].prompt.contains("at most 2 subtasks."))
        #expect(requests.map(\.maxTurns) == [1, 1, 1, 1])
        #expect(requests[1].prompt.hasSuffix("Your subtask: a"))
        #expect(requests[2].prompt.contains("Your subtask: b; then c; then d; then e"))
        #expect(result.progress.turns == 4)
        #expect(events.notices.contains { $0.hasSuffix("(--max-turns 4 pays for 2 workers after 1 planner turn and "
            + "the summary's 1)") })
    }

    @Test func turnsThePlannerLeavesUnusedPassOnToTheWorkers() async throws {
        // --max-turns 8: the planner may use 2, so the plan is capped at 8 - 2 - 1 = 5 workers; it uses 1.
        let backend = ScriptedBackend([answer(Self.fiveSubtasks)] + (1...5).map { answer("did \($0)") }
                                      + [answer("summary")])
        _ = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: 8), events: EventLog())
        #expect(backend.requests.map(\.maxTurns) == [2, 6 / 5, 5 / 4, 4 / 3, 3 / 2, 2 / 1, 1])
    }

    @Test func noTurnLeftMeansNoSummaryRequest() async throws {
        // A backend that reports more turns than it was given leaves nothing for the summary: it is left out.
        let backend = ScriptedBackend([answer(#"["a"]"#), answer("did a", turns: 3), answer("summary")])
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(makeRequest(maxTurns: 4), events: events)
        #expect(backend.requests.count == 2)
        #expect(!result.text.contains("Summary:"))
        #expect(events.notices.contains("plan: no turn of --max-turns 4 is left for the summary; it is left out"))
    }
}
