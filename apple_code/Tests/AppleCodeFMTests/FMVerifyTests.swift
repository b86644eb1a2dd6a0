// Linux only: the backend on the mirror's scripted model.
#if !canImport(FoundationModels)
import AppleCodeCore
import Foundation
import FoundationModelsMirror
import Synchronization
import Testing
@testable import AppleCodeFM

/// `--verify` on the on-device backend: a failing check is the next prompt of the same session.
@Suite struct FMVerifyTests {
    static func verification(_ passes: [Bool], rounds: Int = 2) -> Verification {
        let left = Mutex(passes)
        return Verification(VerifyCheck(command: "swift test", rounds: rounds) { _ in
            let passed = left.withLock { $0.isEmpty ? true : $0.removeFirst() }
            return CheckRun(passed: passed, exitCode: passed ? 0 : 1, output: passed ? "ok" : "error: testAdd failed")
        })
    }

    @Test func aFailedCheckIsThePromptOfTheNextResponse() async throws {
        let (backend, script) = scriptedBackend([
            [.callTool("readFile", args(#"{"path":"a.swift"}"#)), .snapshots(["Done."])],
            [.callTool("readFile", args(#"{"path":"a.swift"}"#)), .snapshots(["Fixed."])],
        ])
        var verified = request()
        verified.verify = Self.verification([false, true])
        let sink = RecordingSink()
        let answer = try await backend.run(verified, events: sink)
        #expect(answer.text == "Fixed.")
        #expect(answer.progress.verify?.passed == true && answer.progress.verify?.rounds == 1)
        #expect(answer.progress.turns == 4)
        let prompts = script.requests.map(\.prompt)
        #expect(prompts.count == 2)
        #expect(prompts[1].hasPrefix("The check `swift test` failed (exit code 1). The end of its output:\n"
            + "error: testAdd failed"))
        #expect(sink.texts == ["Done.", "Fixed."])
    }

    @Test func stillFailingIsErrorVerify() async {
        let (backend, _) = scriptedBackend([[.snapshots(["One."])], [.snapshots(["Two."])]])
        var verified = request()
        verified.verify = Self.verification([false, false], rounds: 1)
        let error = await runFailure(backend, verified)
        #expect(error?.outcome == .verify)
        #expect(error?.partialAnswer == "Two.")
        #expect(error?.progress.verify?.runs == 2)
    }

    @Test func anOverflowDuringARepairKeepsTheFailureInTheCondensedPrompt() async throws {
        let overflow = MirrorStep.fail(.exceededContextWindowSize(context("Exceeded")))
        let (backend, script) = scriptedBackend([
            [.snapshots(["Done."])],
            [.callTool("readFile", args(#"{"path":"a.swift"}"#)), overflow],
            [.snapshots(["Fixed."])],
        ])
        var verified = request()
        verified.verify = Self.verification([false, true])
        let answer = try await backend.run(verified, events: RecordingSink())
        #expect(answer.text == "Fixed.")
        let condensed = script.requests[2].prompt
        #expect(condensed.contains("Task:\nFix the bug in a.py"))
        #expect(condensed.contains("The check `swift test` failed (exit code 1)"))
    }
}
#endif
