import Foundation
import Testing
@testable import AppleCodeCore

/// `--fallback-openai`: a run that stayed rate-limited goes on with the other backend.
@Suite struct FallbackBackendTests {
    final class Scripted: AgentBackend, @unchecked Sendable {
        let name: String
        let model: String
        let contextTokens = 4096
        let outcome: Result<AgentAnswer, AgentError>
        private let lock = NSLock()
        private var seen: [AgentRequest] = []

        init(_ name: String, _ outcome: Result<AgentAnswer, AgentError>) {
            self.name = name
            self.model = name + "-model"
            self.outcome = outcome
        }
        func availability() async -> Availability { Availability(available: true, reason: "") }
        func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
            lock.withLock { seen.append(request) }
            return try outcome.get()
        }
        var requests: [AgentRequest] { lock.withLock { seen } }
    }

    final class Notices: EventSink, @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [String] = []
        func emit(_ event: AgentEvent) { if case .notice(let m) = event.kind { lock.withLock { stored.append(m) } } }
        var all: [String] { lock.withLock { stored } }
    }

    static let task = AgentRequest(prompt: "Fix a.py", instructions: "", tools: [], workspace: "/tmp", maxTurns: 10)

    static func stuck(continuation: String?) -> AgentError {
        AgentError(.backendError, "Apple's on-device model stayed busy or rate-limited after 6 retries",
                   progress: RunProgress(turns: 3, filesChanged: ["a.py"]), continuation: continuation)
    }

    @Test func aRateLimitedRunGoesOnWithTheFallbackFromWhereItStopped() async throws {
        let fm = Scripted("fm", .failure(Self.stuck(continuation: "Task:\nFix a.py\n\nDone so far: ...")))
        let openai = Scripted("openai", .success(AgentAnswer(text: "Fixed.", progress: RunProgress(turns: 2))))
        let switched = Notices()
        let backend = FallbackBackend(primary: fm, fallback: { openai }, onSwitch: { name, model in
            switched.emit(AgentEvent(.notice("\(name) \(model)")))
        })
        let notices = Notices()
        let answer = try await backend.run(Self.task, events: notices)
        #expect(answer.text == "Fixed.")
        #expect(answer.progress.turns == 5 && answer.progress.filesChanged == ["a.py"])
        #expect(openai.requests.map(\.prompt) == ["Task:\nFix a.py\n\nDone so far: ..."])
        #expect(openai.requests.map(\.maxTurns) == [7])
        #expect(notices.all.count == 1 && notices.all[0].contains("the run goes on with the OpenAI-compatible server"))
        #expect(switched.all == ["openai openai-model"])
    }

    @Test func otherFailuresAreNotMoved() async {
        let fm = Scripted("fm", .failure(Self.stuck(continuation: nil)))
        let openai = Scripted("openai", .success(AgentAnswer(text: "no", progress: RunProgress())))
        await #expect(throws: AgentError.self) {
            _ = try await FallbackBackend(primary: fm, fallback: { openai }).run(Self.task, events: Notices())
        }
        #expect(openai.requests.isEmpty)
    }

    @Test func aFallbackThatCannotBeReachedKeepsTheFirstErrorAndSaysSo() async {
        let fm = Scripted("fm", .failure(Self.stuck(continuation: "go on")))
        let backend = FallbackBackend(primary: fm, fallback: {
            throw AgentError(.modelUnavailable, "cannot connect to the OpenAI-compatible server")
        })
        do {
            _ = try await backend.run(Self.task, events: Notices())
            Issue.record("no error")
        } catch let error as AgentError {
            #expect(error.outcome == .backendError)
            #expect(error.message.hasSuffix("the fallback server could not be used either (cannot connect to the "
                + "OpenAI-compatible server)"))
            #expect(error.progress.filesChanged == ["a.py"])
        } catch {
            Issue.record("\(error)")
        }
    }
}
