// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import Foundation
import FoundationModelsMirror
import Synchronization
@testable import AppleCodeFM

/// Collects every event a run emits.
final class RecordingSink: EventSink {
    private let events = Mutex<[AgentEvent]>([])
    func emit(_ event: AgentEvent) { events.withLock { $0.append(event) } }
    var kinds: [AgentEvent.Kind] { events.withLock { $0.map(\.kind) } }
    var details: [ToolResultDetail?] { events.withLock { $0.map(\.detail) } }
    var texts: [String] { kinds.compactMap { if case .text(let delta) = $0 { delta } else { nil } } }
    var notices: [String] { kinds.compactMap { if case .notice(let message) = $0 { message } else { nil } } }
}

/// Collects `--verbose` lines.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var sink: @Sendable (String) -> Void { { line in self.lines.withLock { $0.append(line) } } }
}

/// A small AgentTool with a scripted result that records how it was run.
final class FakeTool: AgentTool {
    let spec: ToolSpec
    private let result: @Sendable (ToolArguments) -> ToolResult
    private let runs = Mutex<[(ToolArguments, Int)]>([])

    init(_ name: String, _ parameters: [ParameterSpec] = [ParameterSpec("path", .string, "file path")],
         description: String = "a test tool", result: @escaping @Sendable (ToolArguments) -> ToolResult = { _ in
             ToolResult(text: "ok", summary: "ok")
         }) {
        spec = ToolSpec(name: name, description: description, parameters: parameters)
        self.result = result
    }

    func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        runs.withLock { $0.append((arguments, context.maxResultTokens)) }
        return result(arguments)
    }

    var arguments: [ToolArguments] { runs.withLock { $0.map(\.0) } }
    var budgets: [Int] { runs.withLock { $0.map(\.1) } }
}

/// A backend on a scripted mirror model, with fast retries. By default the model has no token counts, as on
/// macOS 26.0-26.3, so the budget is the estimator's; `countsTokens` gives it `tokenCount(for:)` (26.4).
func scriptedBackend(_ turns: [[MirrorStep]], availability: SystemLanguageModel.Availability = .available,
                     retry: RetryPolicy = RetryPolicy(firstDelay: .milliseconds(5), maxDelay: .milliseconds(20),
                                                      maxRetries: 3),
                     countsTokens: Bool = false)
    -> (FoundationModelsBackend, MirrorScript) {
    let script = MirrorScript(turns)
    let model = SystemLanguageModel(mirrorAvailability: availability, script: script, countsTokens: countsTokens)
    let permissive = SystemLanguageModel(mirrorAvailability: availability, script: script, countsTokens: countsTokens,
                                         mirrorGuardrails: .permissiveContentTransformations)
    return (FoundationModelsBackend(contextTokens: 4096, languageModel: model, permissiveModel: permissive,
                                    retry: retry), script)
}

func request(_ prompt: String = "Fix the bug in a.py", tools: [any AgentTool] = [FakeTool("readFile")],
             maxTurns: Int = 16, contextTokens: Int = 4096, deadline: ContinuousClock.Instant? = nil,
             log: LogLines? = nil) -> AgentRequest {
    var sink: @Sendable (String) -> Void = { _ in }
    if let log { sink = log.sink }
    return AgentRequest(prompt: prompt, instructions: "You are a careful coding agent.", tools: tools,
                        workspace: "/tmp/ws", maxTurns: maxTurns, contextTokens: contextTokens, deadline: deadline,
                        verbose: log != nil, log: sink)
}

func args(_ json: String) -> GeneratedContent {
    // Test input is fixed JSON; a parse failure is a bug in the test itself.
    (try? GeneratedContent(json: json)) ?? GeneratedContent(kind: .null)
}

func context(_ text: String) -> LanguageModelSession.GenerationError.Context {
    .init(debugDescription: text)
}

/// Runs and returns the AgentError it must throw.
func runFailure(_ backend: FoundationModelsBackend, _ request: AgentRequest,
                _ sink: RecordingSink = RecordingSink()) async -> AgentError? {
    do {
        _ = try await backend.run(request, events: sink)
        return nil
    } catch let error as AgentError {
        return error
    } catch {
        return AgentError(.backendError, "unexpected error type: \(error)")
    }
}
#endif
