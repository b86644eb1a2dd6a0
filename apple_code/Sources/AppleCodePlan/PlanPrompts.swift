import AppleCodeCore

/// The three prompts of a plan run. Each piece that comes from outside (the task, the digest) is cut to a share
/// of the context budget, so a long task cannot crowd out the tools and the answer in a 4,096-token window.
struct PlanPrompts {
    let task: String
    let contextTokens: Int

    private func cutTask() -> String { TokenEstimator.cut(task.trimmed, toTokens: max(64, contextTokens / 4)).text }
    private func cut(_ digest: String, share: Int) -> String {
        TokenEstimator.cut(digest, toTokens: max(64, contextTokens / share)).text
    }

    /// The plan the planner prompt shows as its format. Small models copy it as their plan ("Read src/a.py and fix
    /// the typo in greet()" for a task about calc.py), so a subtask that is one of these is no subtask.
    static let exampleSubtasks = [
        "Read src/a.py and fix the typo in greet()", "Add a test for greet() to tests/test_a.py",
    ]

    func planner(maxSubtasks: Int) -> String {
        """
        Split the task below into at most \(maxSubtasks) subtask\(maxSubtasks == 1 ? "" : "s"). Each subtask is \
        done by a separate helper that starts with an empty memory: it sees only the task, its own subtask and \
        one-line notes about the earlier subtasks. Its memory is small, so give each subtask one or two files to \
        read or change, and name them. Order the subtasks so that later ones can build on earlier ones. You may \
        look at the workspace with the read-only tools first. If the task is small, use one subtask.

        Reply with only a JSON array of strings, for example:
        \(JSONValue.array(Self.exampleSubtasks.map { .string($0) }).jsonText)

        Task: \(cutTask())
        """
    }

    func worker(subtask: String, index: Int, count: Int, digest: String) -> String {
        var prompt = """
            You are doing subtask \(index) of \(count) of a larger task. Do only this subtask, using the tools, \
            then answer in a few sentences: what you did, what you found, which files you changed.

            Task: \(cutTask())

            Your subtask: \(subtask)
            """
        if !digest.isEmpty {
            prompt += "\n\nEarlier subtasks (already done):\n" + cut(digest, share: 4)
        }
        return prompt
    }

    func summary(count: Int, digest: String) -> String {
        """
        The task below was done in \(count) subtasks. What each one did:
        \(cut(digest, share: 2))

        Write a short overall summary for the user, at most three sentences: what was done, what failed, what \
        is left. Do not use tools.

        Task: \(cutTask())
        """
    }
}
