// Linux only: the backend on the mirror's scripted model.
#if !canImport(FoundationModels)
import AppleCodeCore
import AppleCodeTools
import Foundation
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

/// `--verify` on the on-device backend with an answer that shows its fix instead of making it: as in the OpenAI
/// loop, the code shown is put in with editFile and kept only if the check then passes (`ShownCodeTrial`).
@Suite struct FMShownCodeTests {
    static let calc = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    static let note = "(the code the answer showed was put in calc.py and the check `python3 -m unittest` passes "
        + "with it)"

    final class Workspace: Sendable {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("fm-shown-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try FMShownCodeTests.calc.write(to: url.appendingPathComponent("calc.py"), atomically: true,
                                            encoding: .utf8)
        }
        deinit { try? FileManager.default.removeItem(at: url) }
        var calc: String { (try? String(contentsOf: url.appendingPathComponent("calc.py"), encoding: .utf8)) ?? "" }
    }

    /// The real readFile and editFile in `workspace`, and a check that passes only when calc.py adds.
    func verified(_ workspace: Workspace, prompt: String, rounds: Int) -> AgentRequest {
        var verified = request(prompt, tools: [ReadFileTool(), EditFileTool()])
        verified.workspace = workspace.url.path
        verified.verify = Verification(VerifyCheck(command: "python3 -m unittest", rounds: rounds) { _ in
            let adds = workspace.calc.contains("return a + b")
            return CheckRun(passed: adds, exitCode: adds ? 0 : 1, output: adds ? "OK" : "AssertionError: -1 != 5")
        })
        return verified
    }

    /// The backend's own editFile calls in the events: id, arguments, and whether the result was ok.
    func shownCalls(_ sink: RecordingSink) -> [(id: String, arguments: JSONValue, ok: Bool?)] {
        let kinds = sink.kinds
        return kinds.compactMap { kind in
            guard case .toolCall(let id, "editFile", let arguments) = kind, id.hasPrefix("shown") else { return nil }
            let ok = kinds.lazy.compactMap { kind -> Bool? in
                if case .toolResult(id, "editFile", let ok, _, _) = kind { ok } else { nil }
            }.first
            return (id, arguments, ok)
        }
    }

    /// The file was read, not named: the run's reads are candidates too. With rounds left (a repair) or none (the
    /// run would end in `error_verify`), the passing shown code ends the run with no further request.
    @Test(arguments: [2, 0])
    func shownCodeThatMakesTheCheckPassIsKept(rounds: Int) async throws {
        let workspace = try Workspace()
        let shown = "Change add:\n```python\ndef add(a, b):\n    return a + b\n```"
        let (backend, script) = scriptedBackend([
            [.callTool("readFile", args(#"{"path":"calc.py"}"#)), .snapshots([shown])],
        ])
        let sink = RecordingSink()
        let answer = try await backend.run(verified(workspace, prompt: "The tests fail. Fix the bug.", rounds: rounds),
                                           events: sink)
        #expect(workspace.calc == Self.calc.replacingOccurrences(of: "a - b", with: "a + b"))
        #expect(answer.text == shown + "\n\n" + Self.note)
        #expect(answer.progress.verify?.passed == true && answer.progress.verify?.runs == 2)
        #expect(answer.progress.filesChanged == ["calc.py"])
        #expect(answer.progress.turns == 2)  // the read and the answer: the backend's edit is not a turn
        #expect(script.requests.count == 1)
        let calls = shownCalls(sink)
        #expect(calls.map(\.id) == ["shown1"])
        #expect(calls.first?.arguments == ["path": "calc.py", "oldText": "def add(a, b):\n    return a - b",
                                           "newText": "def add(a, b):\n    return a + b"])
        #expect(calls.first?.ok == true)
        #expect(sink.notices.contains(String(Self.note.dropFirst().dropLast())))
    }

    /// Shown code the check still fails with is put back, and the failure goes to the model as before.
    @Test func shownCodeThatDoesNotMakeTheCheckPassIsPutBackBeforeTheRepairRound() async throws {
        let workspace = try Workspace()
        let wrong = "In calc.py:\n```python\ndef add(a, b):\n    return b - a\n```"
        let (backend, script) = scriptedBackend([
            [.snapshots([wrong])],
            [.callTool("readFile", args(#"{"path":"calc.py"}"#)),
             .callTool("editFile", args(#"{"path":"calc.py","oldText":"a - b","newText":"a + b"}"#)),
             .snapshots(["Fixed."])],
        ])
        let sink = RecordingSink()
        let answer = try await backend.run(verified(workspace, prompt: "Fix the bug.", rounds: 1), events: sink)
        #expect(answer.text == "Fixed.")
        #expect(answer.progress.verify?.passed == true && answer.progress.verify?.rounds == 1)
        // After each answer: a run with shown code counts only when it is kept (`adopt`), as in the loop.
        #expect(answer.progress.verify?.runs == 2)
        #expect(script.requests.count == 2)
        #expect(script.requests.last?.prompt.hasPrefix("The check `python3 -m unittest` failed (exit code 1).") == true)
        let calls = shownCalls(sink)
        #expect(calls.map(\.id) == ["shown1", "shown2"])
        #expect(calls.map(\.ok) == [true, true])
        #expect(calls.last?.arguments == ["path": "calc.py", "oldText": "def add(a, b):\n    return b - a",
                                          "newText": "def add(a, b):\n    return a - b"])
        #expect(!sink.notices.contains { $0.contains("the code the answer showed") })
    }

    @Test func shownCodeThatDoesNotMakeTheCheckPassIsPutBackBeforeErrorVerify() async throws {
        let workspace = try Workspace()
        let wrong = "In calc.py:\n```python\ndef add(a, b):\n    return b - a\n```"
        let (backend, script) = scriptedBackend([[.snapshots([wrong])]])
        let sink = RecordingSink()
        let error = await runFailure(backend, verified(workspace, prompt: "Fix the bug.", rounds: 0), sink)
        #expect(error?.outcome == .verify)
        #expect(error?.partialAnswer == wrong)
        #expect(error?.progress.verify?.runs == 1)
        #expect(workspace.calc == Self.calc)
        #expect(script.requests.count == 1)
        #expect(shownCalls(sink).map(\.id) == ["shown1", "shown2"])
    }

    @Test func withoutEditFileNothingIsTried() async throws {
        let workspace = try Workspace()
        var readOnly = verified(workspace, prompt: "Fix calc.py.", rounds: 0)
        readOnly.tools = [ReadFileTool()]
        let (backend, _) = scriptedBackend([[.snapshots(["```python\ndef add(a, b):\n    return a + b\n```"])]])
        let sink = RecordingSink()
        let error = await runFailure(backend, readOnly, sink)
        #expect(error?.outcome == .verify)
        #expect(workspace.calc == Self.calc)
        #expect(shownCalls(sink).isEmpty)
    }
}
#endif
