import AppleCodeCore
import AppleCodeTools
import Foundation
import Testing
@testable import AppleCodeAgent

/// An answer that shows its fix instead of making it: the loop tries its candidate edits (`ShownCode`, tested in
/// AppleCodeCoreTests) under `--verify`, keeping one only when the check passes.
@Suite struct ShownCodeTests {
    static let calc = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"

    final class Workspace: Sendable {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("shown-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try ShownCodeTests.calc.write(to: url.appendingPathComponent("calc.py"), atomically: true, encoding: .utf8)
        }
        deinit { try? FileManager.default.removeItem(at: url) }
        var calc: String { (try? String(contentsOf: url.appendingPathComponent("calc.py"), encoding: .utf8)) ?? "" }
    }

    /// A check that passes when calc.py adds.
    func check(_ workspace: Workspace) -> Verification {
        Verification(VerifyCheck(command: "python3 -m unittest", rounds: 0) { _ in
            let adds = workspace.calc.contains("return a + b")
            return CheckRun(passed: adds, exitCode: adds ? 0 : 1, output: adds ? "OK" : "AssertionError: -1 != 5")
        })
    }

    func verified(_ workspace: Workspace) -> AgentRequest {
        var verified = request([EditFileTool()], prompt: "The tests in test_calc.py fail. Fix calc.py.")
        verified.workspace = workspace.url.path
        verified.verify = check(workspace)
        return verified
    }

    @Test func codeShownInTheAnswerIsKeptWhenTheCheckPassesWithIt() async throws {
        let workspace = try Workspace()
        let model = ScriptedModel([ChatReply(text: "Change add:\n```python\ndef add(a, b):\n    return a + b\n```")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(verified(workspace), events: sink)
        #expect(workspace.calc == Self.calc.replacingOccurrences(of: "a - b", with: "a + b"))
        #expect(answer.text.hasSuffix("(the code the answer showed was put in calc.py and the check `python3 -m "
            + "unittest` passes with it)"))
        #expect(answer.progress.verify?.passed == true && answer.progress.verify?.runs == 2)
        #expect(answer.progress.filesChanged == ["calc.py"])
        // The edit is in the events like a call, never in the conversation the model sees.
        #expect(sink.events.contains { if case .toolCall(_, "editFile", _) = $0.kind { true } else { false } })
        #expect(model.sent.count == 1)
    }

    @Test func codeThatDoesNotMakeTheCheckPassIsPutBack() async throws {
        let workspace = try Workspace()
        let model = ScriptedModel([ChatReply(text: "```python\ndef add(a, b):\n    return b - a\n```")])
        do {
            _ = try await AgentLoop(model: model).run(verified(workspace), events: RecordingSink())
            Issue.record("the check passed")
        } catch let error as AgentError {
            #expect(error.outcome == .verify)
        }
        #expect(workspace.calc == Self.calc)
    }

    @Test func withoutEditFileNothingIsTried() async throws {
        let workspace = try Workspace()
        var readOnly = verified(workspace)
        readOnly.tools = []
        let model = ScriptedModel([ChatReply(text: "```python\ndef add(a, b):\n    return a + b\n```")])
        await #expect(throws: AgentError.self) { try await AgentLoop(model: model).run(readOnly, events: RecordingSink()) }
        #expect(workspace.calc == Self.calc)
    }
}
