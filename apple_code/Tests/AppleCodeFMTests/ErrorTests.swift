// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct ErrorTests {
    @Test(arguments: [
        LanguageModelSession.GenerationError.rateLimited(context("rate limited")),
        .concurrentRequests(context("busy")),
    ])
    func busyModelIsRetriedWithTheSamePrompt(error: LanguageModelSession.GenerationError) async throws {
        let (backend, script) = scriptedBackend([[.fail(error)], [.fail(error)], [.snapshots(["ok"])]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(), events: sink)
        #expect(answer.text == "ok")
        #expect(script.requests.map(\.prompt) == Array(repeating: "Fix the bug in a.py", count: 3))
        #expect(sink.notices.count == 2)
        #expect(sink.notices.allSatisfy { $0.hasPrefix("Apple's on-device model is busy or rate-limited; retrying") })
    }

    @Test func aRetryAfterToolsRanContinuesFromTheJournal() async throws {
        let (backend, script) = scriptedBackend([
            [.callTool("readFile", args(#"{"path":"a.py"}"#)), .fail(.rateLimited(context("slow down")))],
            [.snapshots(["ok"])],
        ])
        _ = try await backend.run(request(), events: RecordingSink())
        #expect(script.requests[1].prompt.contains("1. readFile"))
    }

    @Test func rateLimitedBeyondTheRetriesIsExit1() async {
        let limited = MirrorStep.fail(.rateLimited(context("rate limited")))
        let (backend, script) = scriptedBackend(Array(repeating: [limited], count: 10))
        let error = await runFailure(backend, request())
        #expect(error?.outcome == .backendError)
        #expect(error?.outcome.exitCode == 1)
        #expect(error?.message.contains("after 3 retries") == true)
        #expect(script.requests.count == 4)
        // Nothing was done yet: another model would go on from the task itself.
        #expect(error?.continuation == "Fix the bug in a.py")
    }

    @Test func aRateLimitedRunLeavesWhatWasDoneForTheFallback() async {
        let limited = MirrorStep.fail(.rateLimited(context("rate limited")))
        let (backend, _) = scriptedBackend([[.callTool("readFile", args(#"{"path":"a.py"}"#)), limited]]
                                           + Array(repeating: [limited], count: 10))
        let error = await runFailure(backend, request())
        let continuation = error?.continuation ?? ""
        #expect(continuation.hasPrefix("Task:\nFix the bug in a.py\n\nAnother model started this task"))
        #expect(continuation.contains(#"1. readFile {"path":"a.py"}"#))
    }

    @Test func otherFailuresLeaveNoContinuation() async {
        let (backend, _) = scriptedBackend([[.fail(.assetsUnavailable(context("gone")))]])
        #expect(await runFailure(backend, request())?.continuation == nil)
    }

    /// A refusal ends the run; a guardrail violation does after the permissive plain-text answer is refused too.
    @Test(arguments: [
        [LanguageModelSession.GenerationError.guardrailViolation(context("unsafe")),
         .guardrailViolation(context("still unsafe"))],
        [.refusal(.init(transcriptEntries: []), context("refused"))],
    ])
    func guardrailAndRefusalAreErrorGuardrail(errors: [LanguageModelSession.GenerationError]) async {
        let (backend, script) = scriptedBackend(errors.map { [.fail($0)] })
        let failure = await runFailure(backend, request())
        #expect(script.requests.count == errors.count)
        #expect(failure?.outcome == .guardrail)
        #expect(failure?.outcome.subtype == "error_guardrail")
        #expect(failure?.message.hasPrefix("Apple's on-device model") == true)
        #expect(failure?.message.contains("Rephrase the task") == true)
    }

    @Test func aGuardrailViolationGetsOnePlainTextAnswerWithPermissiveGuardrails() async throws {
        let (backend, script) = scriptedBackend([
            [.callTool("readFile", args(#"{"path":"a.py"}"#)), .fail(.guardrailViolation(context("unsafe")))],
            [.snapshots(["a.py kills stale processes."])],
        ])
        let log = LogLines()
        let answer = try await backend.run(request("What does a.py kill?", log: log), events: RecordingSink())
        #expect(answer.text == "a.py kills stale processes.")
        let requests = script.requests
        #expect(requests.map(\.guardrails) == ["default", "permissiveContentTransformations"])
        // Tool calls keep the default guardrails: the permissive request offers none.
        #expect(requests[0].toolNames == ["readFile"] && requests[1].toolNames.isEmpty)
        #expect(requests[1].prompt.contains("Task:\nWhat does a.py kill?"))
        #expect(requests[1].prompt.contains("This continues without tools."))
        #expect(requests[1].prompt.contains(#"1. readFile {"path":"a.py"}"#))
        #expect(log.all.contains { $0.contains("with SystemLanguageModel.Guardrails.permissiveContentTransformations") })
        #expect(answer.progress.turns == 2)
    }

    @Test func missingAssetsAreModelUnavailable() async {
        let (backend, _) = scriptedBackend([[.fail(.assetsUnavailable(context("no assets")))]])
        let failure = await runFailure(backend, request())
        #expect(failure?.outcome == .modelUnavailable)
        #expect(failure?.message.contains("apple-code --check") == true)
    }

    @Test func unsupportedLanguageSaysSo() async {
        let (backend, _) = scriptedBackend([[.fail(.unsupportedLanguageOrLocale(context("xx")))]])
        let failure = await runFailure(backend, request())
        #expect(failure?.outcome == .backendError)
        #expect(failure?.message.contains("does not support this language") == true)
    }

    @Test(arguments: [
        LanguageModelSession.GenerationError.decodingFailure(context("bad json")),
        .unsupportedGuide(context("no guide")),
    ])
    func unusableOutputIsABackendError(error: LanguageModelSession.GenerationError) async {
        let (backend, _) = scriptedBackend([[.fail(error)]])
        let failure = await runFailure(backend, request())
        #expect(failure?.outcome == .backendError)
        #expect(failure?.message.hasPrefix("Apple's on-device model produced unusable output") == true)
    }

    @Test func anUnknownErrorIsABackendErrorWithItsText() async {
        struct Odd: Error, CustomStringConvertible { var description: String { "ModelManagerError -1" } }
        let (backend, _) = scriptedBackend([[.failWith(Odd())]])
        let failure = await runFailure(backend, request())
        #expect(failure?.outcome == .backendError)
        #expect(failure?.message == "Apple's on-device model failed: ModelManagerError -1")
    }

    @Test func timeoutStopsTheTurnAndKeepsThePartialAnswer() async {
        let (backend, _) = scriptedBackend([[.snapshots(["Working on", "Working on it"]), .hang]])
        let sink = RecordingSink()
        let started = ContinuousClock.now
        // Thirty seconds: with every suite running in parallel on two busy cores, one, three and then eight seconds
        // were sometimes gone before the second snapshot was read (load average 20).
        let failure = await runFailure(backend, request(deadline: .now + .seconds(30)), sink)
        #expect(failure?.outcome == .timeout)
        #expect(failure?.outcome.exitCode == 124)
        #expect(failure?.partialAnswer == "Working on it")
        #expect(ContinuousClock.now - started < .seconds(120))  // the scripted turn hangs for good
    }

    @Test func cancellingTheRunIsInterrupted() async {
        let (backend, _) = scriptedBackend([[.snapshots(["Part"]), .hang]])
        let sink = RecordingSink()
        let task = Task { await runFailure(backend, request(), sink) }
        // Cancel once the first text is out (polling: the machine may be busy).
        for _ in 0..<500 where sink.texts.isEmpty { try? await Task.sleep(for: .milliseconds(10)) }
        task.cancel()
        let failure = await task.value
        #expect(failure?.outcome == .interrupted)
        #expect(failure?.partialAnswer == "Part")
    }

    @Test func toolCallsPastMaxTurnsAreRefusedThenEndTheRun() async throws {
        let read = FakeTool("readFile")
        let call = MirrorStep.callTool("readFile", args(#"{"path":"a.py"}"#))
        let (backend, script) = scriptedBackend([[call, call, call, .snapshots(["never"])]])
        let sink = RecordingSink()
        let failure = await runFailure(backend, request(tools: [read], maxTurns: 1), sink)
        #expect(failure?.outcome == .maxTurns)
        #expect(read.arguments.count == 1)
        let outputs = try #require(script.requests.first?.toolExchanges.map(\.output))
        #expect(outputs.count == 2)
        #expect(outputs[1].hasPrefix("Error: the limit of 1 tool calls is reached"))
        #expect(failure?.progress.turns == 2)
    }
}
#endif
