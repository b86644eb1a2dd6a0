import Testing
@testable import AppleCodeCore

@Suite struct OptionsTests {
    func parse(_ args: [String], env: [String: String] = [:], tty: Bool = true, stdin: String? = "") -> Result<Command, UsageError> {
        OptionParser.parse(args, environment: env, prompt: PromptSource(stdinIsTerminal: tty) { stdin })
    }

    func options(_ args: [String], env: [String: String] = [:], tty: Bool = true, stdin: String? = "") throws -> RunOptions {
        guard case .run(let options) = try parse(args, env: env, tty: tty, stdin: stdin).get() else {
            throw UsageError("not a run")
        }
        return options
    }

    func usageError(_ args: [String], tty: Bool = true, stdin: String? = "") -> String? {
        if case .failure(let error) = parse(args, tty: tty, stdin: stdin) { return error.message }
        return nil
    }

    @Test func defaultsMatchTheContract() throws {
        let o = try options(["fix it"])
        #expect(o.prompt == "fix it")
        #expect(o.timeoutSeconds == 120 && o.maxTurns == 16 && o.backend == .auto && o.outputFormat == .text)
        #expect(o.baseURL == "http://127.0.0.1:11434/v1" && !o.openAIConfigured && o.model == nil)
        #expect(o.contextTokens == nil && !o.plan && o.maxSubtasks == 5 && !o.readOnly && !o.noCommands)
        #expect(o.verify == nil && o.verifyRounds == 2)
    }

    @Test func fallbackNeedsAConfiguredServer() throws {
        #expect(try options(["--fallback-openai", "--base-url", "http://127.0.0.1:1/v1", "x"]).fallbackOpenAI)
        #expect(try options(["--fallback-openai", "x"], env: ["APPLE_CODE_MODEL": "m"]).fallbackOpenAI)
    }

    @Test func verifyTakesACommandAndItsRounds() throws {
        let o = try options(["--verify", "pytest -q", "--verify-rounds=0", "task"])
        #expect(o.verify == "pytest -q" && o.verifyRounds == 0)
        #expect(try options(["--verify=make test", "task"]).verifyRounds == 2)
    }

    /// More hidden paths from the command line (repeatable) and APPLE_CODE_HIDE (`:`-separated),
    /// for runs and the sandbox check alike; the daemon's web port for --deny-port.
    @Test func hiddenPathsAndDeniedPorts() throws {
        let o = try options(["--hide", "/a/.env", "--hide=/b state", "--deny-port", "8787", "go"],
                            env: ["APPLE_CODE_HIDE": "/c::/d"])
        #expect(o.hide == ["/a/.env", "/b state", "/c", "/d"] && o.deniedPorts == [8787])
        guard case .sandboxCheck(let check) = try parse(["--sandbox-check", "--hide", "/x"], env: ["APPLE_CODE_HIDE": "/y"]).get()
        else { Issue.record("not a sandbox check"); return }
        #expect(check.hide == ["/x", "/y"])
        #expect(usageError(["--hide", "", "go"]) == "--hide must not be empty")
        #expect(usageError(["--deny-port", "0", "go"])?.hasPrefix("--deny-port must be a port number") == true)
        #expect(usageError(["--deny-port", "http", "go"])?.hasPrefix("--deny-port must be a port number") == true)
    }

    @Test func everyOptionIsParsedInBothSpellings() throws {
        let o = try options(["--cwd", "/w", "--system=be brief", "--system-file", "s.txt", "--timeout", "2.5",
                             "--backend=openai", "--base-url", "http://h:1/v1", "--model", "m", "--api-key", "k",
                             "--output-format", "stream-json", "--max-turns=3", "--read-only", "--no-commands",
                             "--context-tokens", "2048", "--plan", "--max-subtasks", "50", "--parallel", "--verbose",
                             "task"])
        #expect(o.cwd == "/w" && o.system == "be brief" && o.systemFile == "s.txt" && o.timeoutSeconds == 2.5)
        #expect(o.backend == .openai && o.baseURL == "http://h:1/v1" && o.model == "m" && o.apiKey == "k")
        #expect(o.outputFormat == .streamJSON && o.maxTurns == 3 && o.readOnly && o.noCommands)
        #expect(o.contextTokens == 2048 && o.plan && o.maxSubtasks == 20 && o.parallel && o.verbose)
        #expect(o.openAIConfigured && o.prompt == "task")
    }

    @Test func environmentFillsTheOpenAISettings() throws {
        let env = ["APPLE_CODE_BASE_URL": "http://e/v1", "APPLE_CODE_MODEL": "qwen", "APPLE_CODE_API_KEY": "s"]
        let o = try options(["x"], env: env)
        #expect(o.baseURL == "http://e/v1" && o.model == "qwen" && o.apiKey == "s" && o.openAIConfigured)
        let given = try options(["--base-url", "http://o/v1", "--model", "m", "x"], env: env)
        #expect(given.baseURL == "http://o/v1" && given.model == "m")
    }

    @Test func promptComesFromStdinWhenDashOrAbsentWithoutATerminal() throws {
        #expect(try options(["-"], tty: true, stdin: "from stdin").prompt == "from stdin")
        #expect(try options([], tty: false, stdin: "piped").prompt == "piped")
        #expect(try options(["--", "-starts with dash"]).prompt == "-starts with dash")
        #expect(try options(["--", "--help"]).prompt == "--help")
    }

    @Test func missingOrEmptyPromptIsAUsageError() {
        #expect(usageError([], tty: true)?.contains("no prompt") == true)
        #expect(usageError([], tty: false, stdin: "  \n")?.contains("empty") == true)
        #expect(usageError([""])?.contains("empty") == true)
        #expect(usageError(["-"], stdin: nil)?.contains("UTF-8") == true)
    }

    @Test func badOptionsAreUsageErrors() {
        let cases: [([String], String)] = [
            (["--bogus", "x"], "unknown option --bogus"), (["-x"], "unknown option -x"),
            (["--timeout", "0", "x"], "--timeout"), (["--timeout", "abc", "x"], "--timeout"),
            (["--timeout", "1e30", "x"], "--timeout"), (["--timeout", "nan", "x"], "--timeout"),
            (["--max-turns", "-1", "x"], "--max-turns"), (["--context-tokens", "1.5", "x"], "--context-tokens"),
            (["--backend", "gpt", "x"], "--backend"), (["--output-format", "xml", "x"], "--output-format"),
            (["--base-url", "localhost:1", "x"], "--base-url"), (["--cwd"], "needs a value"),
            (["a", "b"], "one PROMPT"), (["--max-subtasks", "3", "x"], "needs --plan"),
            (["--plan", "--parallel", "x"], "--read-only"), (["--verbose=1", "x"], "takes no value"),
            (["--max-subtasks", "0", "--plan", "x"], "--max-subtasks"),
            // An unset variable in `--cwd "$WS"` must not quietly make the caller's own folder the workspace.
            (["--cwd", "", "x"], "--cwd must not be empty"), (["--cwd=", "x"], "--cwd must not be empty"),
            (["--verify", " ", "x"], "--verify must not be empty"), (["--verify-rounds", "1", "x"], "needs --verify"),
            (["--verify", "t", "--verify-rounds", "-1", "x"], "--verify-rounds"),
            (["--verify", "t", "--verify-rounds", "two", "x"], "--verify-rounds"),
            (["--verify", "t", "--read-only", "x"], "--read-only"),
            (["--fallback-openai", "x"], "needs an OpenAI-compatible server"),
            (["--fallback-openai", "--backend", "openai", "--model", "m", "x"], "not --backend openai"),
        ]
        for (args, expected) in cases {
            let message = usageError(args)
            #expect(message?.contains(expected) == true, "\(args): \(message ?? "no error")")
        }
    }

    @Test func helpVersionAndCheckNeedNoPrompt() throws {
        #expect(try parse(["--help"]).get() == .help)
        #expect(try parse(["--version"]).get() == .version)
        guard case .check(let o) = try parse(["--check", "--backend", "openai"], tty: true).get() else {
            Issue.record("not a check")
            return
        }
        #expect(o.backend == .openai)
        #expect(try parse(["--sandbox-check"], tty: true).get() == .sandboxCheck(RunOptions()))
        #expect(OptionParser.usage.contains("--sandbox-check"))
    }

    @Test func theRequestedFormatIsFoundEvenWhenParsingFails() {
        #expect(OptionParser.requestedFormat(["--bogus", "--output-format", "stream-json"]) == .streamJSON)
        #expect(OptionParser.requestedFormat(["--output-format=json"]) == .json)
        #expect(OptionParser.requestedFormat(["--", "--output-format", "json"]) == .text)
        // As the parser: the last one wins, and another option's value is not an option.
        #expect(OptionParser.requestedFormat(["--output-format", "text", "--output-format", "stream-json", "--x"])
            == .streamJSON)
        #expect(OptionParser.requestedFormat(["--output-format", "json", "--system", "--output-format", "--x"])
            == .json)
    }
}

@Suite struct BudgetTests {
    @Test func figuresAddUpAndTheReserveIsAnEighth() {
        let spec = ToolSpec(name: "readFile", description: "Read a file.", parameters: [ParameterSpec("path", .string, "File.")])
        let budget = ContextBudget(contextTokens: 4096, instructions: "abc", tools: [spec])
        #expect(budget.answerReserve == 512)
        #expect(budget.instructionTokens == TokenEstimator.estimate("abc"))
        #expect(budget.toolTokens == TokenEstimator.estimate(JSONValue.array([spec.openAIDefinition]).jsonText))
        #expect(budget.conversationTokens == 4096 - budget.toolTokens - 512)
        #expect(ContextBudget.answerReserve(contextTokens: 100) == 64)
        #expect(ContextBudget.answerReserve(contextTokens: 100_000) == 1024)
    }

    @Test func checkThrowsErrorContextWithTheFigures() {
        let budget = ContextBudget(contextTokens: 300, instructions: String(repeating: "x", count: 900), tools: [])
        do {
            try budget.check(task: "t")
            Issue.record("expected error_context")
        } catch let error as AgentError {
            #expect(error.outcome == .context)
            #expect(error.message.contains("instructions 301"))
            #expect(error.message.contains("alone exceed"))
        } catch { Issue.record("\(error)") }
        #expect(throws: Never.self) { try ContextBudget(contextTokens: 4096, instructions: "x", tools: []).check(task: "t") }
    }

    @Test func builtInInstructionsStayShort() {
        #expect(TokenEstimator.estimate(BuiltInInstructions.text) <= 50)
        #expect(BuiltInInstructions.combined(with: "Be brief.").hasSuffix("\n\nBe brief."))
        #expect(BuiltInInstructions.combined(with: "  ") == BuiltInInstructions.text)
    }
}

@Suite struct EventEncodingTests {
    @Test func eventsEncodeAsTheContractSays() throws {
        let start = AgentEvent(.start(StartInfo(version: "1", backend: "openai", model: "m", cwd: "/w",
                                                contextTokens: 4096, tools: ["readFile"])))
        #expect(start.json.jsonText == #"{"type":"start","version":"1","backend":"openai","model":"m","cwd":"/w","context_tokens":4096,"tools":["readFile"]}"#)
        let result = AgentEvent(.toolResult(id: "c1", name: "readFile", ok: true, summary: "s", truncated: false), subtask: 2)
        #expect(result.json.jsonText == #"{"type":"tool_result","subtask":2,"id":"c1","name":"readFile","ok":true,"summary":"s","truncated":false}"#)
        let detailed = AgentEvent(.toolResult(id: "c2", name: "runCommand", ok: false, summary: "s", truncated: false),
                                  detail: ToolResultDetail(output: "exit code 2", exitCode: 2, diff: "--- a/x\n"))
        #expect(detailed.json.jsonText == #"{"type":"tool_result","id":"c2","name":"runCommand","ok":false,"summary":"s","truncated":false,"output":"exit code 2","exit_code":2,"diff":"--- a/x\n"}"#)
        var progress = RunProgress(turns: 3, usage: Usage(inputTokens: 10, outputTokens: 2), filesChanged: ["a", "a", "b"])
        progress.commandsRun = 1
        let report = RunReport(outcome: .maxTurns, result: "r", durationMs: 5, progress: progress, backend: "openai", model: "m")
        #expect(AgentEvent(.result(report)).json.jsonText == #"{"type":"result","subtype":"error_max_turns","is_error":true,"result":"r","num_turns":3,"duration_ms":5,"usage":{"input_tokens":10,"output_tokens":2,"estimated":true},"files_changed":["a","b"],"commands_run":1,"backend":"openai","model":"m"}"#)
        progress.usage = Usage(inputTokens: 10, outputTokens: 2, estimated: false, fixedTokens: 469)
        let counted = RunReport(outcome: .success, result: "r", durationMs: 5, progress: progress, backend: "fm", model: "m")
        #expect(AgentEvent(.result(counted)).json["usage"]?.jsonText == #"{"input_tokens":10,"output_tokens":2,"estimated":false,"fixed_tokens":469}"#)
    }

    @Test func longTextDeltasAreSplitWithoutLoss() throws {
        let text = String(repeating: "é\"line\"\n", count: 5000)
        let lines = JSONLines.lines(for: AgentEvent(.text(delta: text)))
        #expect(lines.count > 1)
        var joined = ""
        for line in lines {
            #expect(line.utf8.count < JSONLines.maxLineBytes)
            joined += try JSONValue.parse(line)["delta"]?.stringValue ?? ""
        }
        #expect(joined == text)
    }

    @Test func otherLongEventsAreCutAndSaySo() throws {
        let content = String(repeating: "x\n", count: 40_000)
        let event = AgentEvent(.toolCall(id: "c", name: "writeFile", arguments: ["path": "a", "content": .string(content)]))
        let line = JSONLines.lines(for: event)[0]
        #expect(line.utf8.count < JSONLines.maxLineBytes)
        let parsed = try JSONValue.parse(line)
        #expect(parsed["arguments"]?["path"] == "a")
        #expect(parsed["arguments"]?["content"]?.stringValue?.contains("cut:") == true)
        let report = RunReport(outcome: .success, result: String(repeating: "ü", count: 20_000), durationMs: 1,
                               progress: RunProgress(), backend: "b", model: "m")
        let resultLine = JSONLines.fit(AgentEvent(.result(report)).json)
        #expect(resultLine.utf8.count < JSONLines.maxLineBytes)
        #expect(try JSONValue.parse(resultLine)["result"]?.stringValue?.contains("line limit 16 KiB") == true)
    }

    /// Huge arguments made of many short values (numbers, short strings, many keys) have no long string to cut:
    /// the container is cut instead, and the event's own short fields (`type`, `id`) are never touched.
    @Test func eventsWithoutOneLongStringStillFitAndKeepTheirType() throws {
        let numbers = JSONValue.array((0..<5000).map { JSONValue.int($0) })
        var manyKeys = JSONObject()
        for index in 0..<3000 { manyKeys["k\(index)"] = "v" }
        let events = [
            AgentEvent(.toolCall(id: "c1", name: "readFile", arguments: ["path": "a", "junk": numbers])),
            AgentEvent(.toolCall(id: "c2", name: "readFile", arguments: .object(manyKeys))),
        ]
        for event in events {
            let line = JSONLines.lines(for: event)[0]
            #expect(line.utf8.count < JSONLines.maxLineBytes)
            let parsed = try JSONValue.parse(line)
            #expect(parsed["type"] == "tool_call")
            #expect(parsed["name"] == "readFile")
            #expect(line.contains("line limit 16 KiB"))
        }
        let first = try JSONValue.parse(JSONLines.lines(for: events[0])[0])
        #expect(first["arguments"]?["path"] == "a")
    }
}

@Suite struct EstimatorTests {
    @Test func bytesCostByClass() {
        #expect(TokenEstimator.estimate("") == 1)
        #expect(TokenEstimator.estimate("abc") == 2)              // 3 ASCII bytes: 1 token + 1
        #expect(TokenEstimator.estimate("123") == 4)              // digits: 1 each
        #expect(TokenEstimator.estimate("é") == 3)                // 2 bytes x 0.7 = 1.4 -> 2, + 1
        #expect(TokenEstimator.estimate(String(repeating: "x", count: 3000)) == 1001)
    }

    @Test func cutAlwaysFitsAndKeepsHeadAndTail() {
        for text in [String(repeating: "line of code\n", count: 2000), (1...5000).map(String.init).joined(separator: "\n"),
                     String(repeating: "日本語のテキスト", count: 800)] {
            for tokens in [1, 5, 20, 40, 100, 1000] {
                let cut = TokenEstimator.cut(text, toTokens: tokens)
                #expect(cut.truncated)
                #expect(TokenEstimator.estimate(cut.text) <= tokens, "\(tokens)")
            }
            let roomy = TokenEstimator.cut(text, toTokens: 1000).text
            #expect(roomy.hasPrefix(String(text.prefix(20))))
            #expect(roomy.hasSuffix(String(text.suffix(5))))
            #expect(roomy.contains("bytes cut to fit the context budget"))
        }
        #expect(TokenEstimator.cut("short", toTokens: 10) == ("short", false))
    }
}
