import Foundation

/// `--verify`, after the check failed on a final answer that may show its fix instead of making it (`ShownCode`):
/// what both backends do before a repair round or `error_verify`. Each candidate goes in through editFile, the
/// check runs, and it stays only if the check passes (else it is put back the same way). The model's words are
/// never taken for the fix: only the check decides. The edits are the backend's own calls, not the model's: the
/// events show them like calls (ids `shownN`) and the run's progress counts them, the conversation never has them.
public struct ShownCodeTrial: Sendable {
    let editFile: any AgentTool
    let request: AgentRequest
    let events: any EventSink

    /// Nil when the run has no editFile tool: then nothing is tried.
    public init?(request: AgentRequest, events: any EventSink) {
        guard let editFile = request.tools.first(where: { $0.name == "editFile" }) else { return nil }
        self.editFile = editFile
        self.request = request
        self.events = events
    }

    /// The answer with a note of where its code was put, when a candidate made the check pass (`verification`
    /// then has that run, `adopt`); nil when none did (each put back). The candidates' files: `touched` (those the
    /// run read or wrote), then those the task or the answer names. `nextCall` numbers the edits' ids; `record`
    /// takes each edit's result for the run's progress.
    public func run(answer: String, touched: [String], verification: inout Verification, nextCall: () -> Int,
                    record: (ToolResult) -> Void) async -> String? {
        let files = ShownCode.files(touched + FileMentions.names(in: request.prompt + "\n" + answer),
                                    workspace: request.workspace)
        for shown in ShownCode.edits(answer: answer, files: files) {
            let forward: JSONValue = ["path": .string(shown.path), "oldText": .string(shown.oldText),
                                      "newText": .string(shown.newText)]
            let put = await call(forward, id: "shown\(nextCall())")
            record(put)
            guard put.ok else { continue }
            let run = await verification.check.run(request.deadline)
            if run.passed {
                verification.adopt(run, events: events)
                let note = "the code the answer showed was put in \(shown.path) and the check `"
                    + "\(verification.check.command)` passes with it"
                request.log("verify: " + note)
                events.notice(note)
                return answer + "\n\n(" + note + ")"
            }
            let back: JSONValue = ["path": .string(shown.path), "oldText": .string(shown.newText),
                                   "newText": .string(shown.oldText)]
            let undone = await call(back, id: "shown\(nextCall())")
            record(undone)
            request.log("verify: the code the answer showed, put in \(shown.path), does not make the check pass; "
                + (undone.ok ? "put back" : "putting it back failed: \(undone.summary)"))
        }
        return nil
    }

    /// One editFile run, announced and answered in the events like a model's call.
    private func call(_ arguments: JSONValue, id: String) async -> ToolResult {
        events.emit(.toolCall(id: id, name: editFile.name, arguments: arguments))
        let context = ToolContext(workspace: request.workspace, maxResultTokens: 256, deadline: request.deadline,
                                  log: request.log)
        let result = await editFile.call(raw: arguments, context: context)
        events.toolResult(id: id, name: editFile.name, result)
        return result
    }
}
