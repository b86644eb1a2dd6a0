import AppleCodeCore
import Foundation

/// `runCommand(command, timeout=30)`: `sh -c` in the workspace, inside the OS sandbox when there is one, with
/// stdin closed and its own process group, killed whole on timeout; answers with the exit code and the head
/// and tail of the output.
public struct RunCommandTool: WorkspaceTool {
    public static let defaultTimeout = 30
    public static let maxTimeout = 600

    public let spec = ToolSpec(
        name: "runCommand",
        description: "Run a shell command (timeout in s).",
        parameters: [
            ParameterSpec("command", .string, ""),
            ParameterSpec("timeout", .integer, "", required: false),
        ])

    /// nil: the machine's sandbox, probed on the first command (not at start-up, which must stay quick).
    public let sandbox: CommandSandbox?
    /// Whether a result says the command ran without a sandbox: when the machine's was detected, not chosen.
    let announcesMissingSandbox: Bool
    /// The Mac toolchain hints this run has given (each once).
    let hints = CommandHints()

    public init(sandbox: CommandSandbox? = nil) {
        self.init(sandbox: sandbox, announcesMissingSandbox: sandbox == nil)
    }

    init(sandbox: CommandSandbox?, announcesMissingSandbox: Bool) {
        self.sandbox = sandbox
        self.announcesMissingSandbox = announcesMissingSandbox
    }

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let command = arguments.string("command") ?? ""
        if command.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw ToolFailure("the command is empty") }
        if let reason = CommandPolicy.refusal(for: command) {
            throw ToolFailure("refused: \(reason). Ask the user to run it themselves if it is really needed")
        }
        let seconds = min(max(arguments.int("timeout") ?? Self.defaultTimeout, 1), Self.maxTimeout)
        if let problem = CommandSandbox.broadWorkspaceProblem(workspace.root) {
            throw ToolFailure("refused: the workspace \(problem)")
        }
        if let deadline = context.deadline, deadline <= .now {
            throw ToolFailure("no time is left in this run to start a command")
        }
        let sandbox = self.sandbox ?? .detected
        context.log("runCommand sandbox: \(sandbox.label)")
        if case .broken(let reason) = sandbox {
            throw ToolFailure("the command sandbox does not work here (\(reason)), so commands are not run. "
                              + "Tell the user; `apple-code --check` shows the sandbox")
        }
        let watched = sandbox.watchedGitPointers(workspace: workspace.root)
        let outcome = try await CommandRunner.run(sandbox.argv(command: command, workspace: workspace.root,
                                                               hidden: workspace.hidden),
                                                  in: workspace.root, timeout: .seconds(seconds),
                                                  deadline: context.deadline)
        var notes: [String] = []
        if announcesMissingSandbox, case .none(let reason) = sandbox {
            notes.append("Note: this command ran without a sandbox: \(reason).")
        }
        // Everything the command started is gone by now (its own PID namespace), so nothing remakes them.
        if let note = CommandSandbox.removeGitPointers(madeFrom: watched, workspace: workspace.root) {
            notes.append(note)
        }
        var result = Self.describe(outcome, timeout: seconds, command: command, notes: notes, hints: hints)
        result.commandsRun = 1
        return result
    }

    /// The text the model sees: how the command ended first, then its output (head and tail when long).
    static func describe(_ outcome: CommandOutcome, timeout: Int, command: String, notes given: [String] = [],
                         hints: CommandHints = CommandHints()) -> ToolResult {
        let output = outcome.output.isEmpty ? nil : outcome.output.text
        let status: String
        let ok: Bool
        switch outcome.ending {
        case .exited(0):
            ok = true
            status = output == nil ? "Command succeeded with no output (exit code 0)." : "exit code 0"
        case .exited(let code):
            ok = false
            status = output == nil ? "Command failed with exit code \(code) and no output." : "exit code \(code)"
        case .signalled(let signal):
            ok = false
            status = "Command was killed by signal \(signal)."
        case .timedOut:
            ok = false
            status = "Command timed out after \(timeout) s; it and everything it started were killed."
        case .stopped:
            ok = false
            status = "Command stopped: the run was cancelled or its time ran out; it was killed."
        }
        // Placed before the output (which may be cut) so that it is always seen; only for a failure.
        let notes = given + (ok ? [] : output.map(hints.new(for:)) ?? [])
        let text = ([status] + notes + (output.map { [$0] } ?? [])).joined(separator: "\n")
        let short = command.count > 60 ? String(command.prefix(60)) + "..." : command
        let ending = switch outcome.ending {
        case .exited(let code): "exit \(code)"
        case .signalled(let signal): "signal \(signal)"
        case .timedOut: "timed out"
        case .stopped: "stopped"
        }
        // A command that ran and failed is information for the model, not a tool error: no `Error:` text, but
        // `ok` false so the event shows it failed.
        var exitCode: Int?
        if case .exited(let code) = outcome.ending { exitCode = Int(code) }
        return ToolResult(text: text, ok: ok, summary: "\(short): \(ending)", exitCode: exitCode)
    }
}

/// A courtesy blocklist of obviously destructive commands. Trivially bypassed (field notes §5); the OS
/// sandbox is the protection. It only spares a user an accident where no sandbox is available.
enum CommandPolicy {
    private static let rules: [(pattern: String, reason: String)] = [
        (#"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]+\s+)*(/|~|\$HOME)/?\*?(\s|$|;|&|\|)"#,
         "recursive delete of / or the home folder"),
        (#":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}"#, "fork bomb"),
        (#"\bmkfs(\.\w+)?\b"#, "formats a file system"),
        (#"\bdd\b.*\bof=/dev/"#, "writes to a raw device"),
        (#"(^|[;&|]\s*)(sudo|shutdown|reboot|halt|poweroff)\b"#, "needs admin rights or stops the machine"),
    ]

    static func refusal(for command: String) -> String? {
        for rule in rules {
            if command.range(of: rule.pattern, options: .regularExpression) != nil { return rule.reason }
        }
        return nil
    }
}
