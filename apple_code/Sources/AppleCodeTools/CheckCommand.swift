import AppleCodeCore

/// `--verify CMD` run the way runCommand runs a command (the same tool, so the same sandbox, process-group kill
/// and output capture), with runCommand's longest timeout and never past the run's deadline. It is the user's
/// command, not the model's: it does not count in `commands_run`.
public enum CheckCommand {
    public static func check(_ command: String, rounds: Int, workspace: String, tool: RunCommandTool = RunCommandTool(),
                             log: @escaping @Sendable (String) -> Void = { _ in }) -> VerifyCheck {
        VerifyCheck(command: command, rounds: rounds) { deadline in
            await run(command, workspace: workspace, tool: tool, deadline: deadline, log: log)
        }
    }

    static func run(_ command: String, workspace: String, tool: RunCommandTool, deadline: ContinuousClock.Instant?,
                    log: @escaping @Sendable (String) -> Void) async -> CheckRun {
        log("verify: running `\(command)`")
        let arguments: JSONValue = ["command": .string(command), "timeout": .int(RunCommandTool.maxTimeout)]
        // The whole output as captured (runCommand's head and tail); the tail is cut later, to what each use allows.
        let context = ToolContext(workspace: workspace, maxResultTokens: 1 << 20, deadline: deadline, log: log)
        let result = await tool.call(raw: arguments, context: context)
        let passed = result.exitCode == 0
        log("verify: `\(command)` \(passed ? "passed" : "failed") (\(result.summary))")
        return CheckRun(passed: passed, exitCode: result.exitCode, output: result.text)
    }
}
