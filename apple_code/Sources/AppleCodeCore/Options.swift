/// The command line of `apple-code` (contract: Invocation, Options), parsed into plain values. Every option is
/// declared once, in `OptionParser.options` (name, value, help, what it sets): the usage text and the parser are
/// made from that list, and a test checks CONTRACT.md's options table against it. Parsing reads no file and no
/// stream itself: the caller supplies the environment and the prompt source, so every rule is unit-testable.

public enum BackendChoice: String, Sendable, Equatable, CaseIterable {
    case auto, fm, openai
}

public enum OutputFormat: String, Sendable, Equatable, CaseIterable {
    case text
    case json
    case streamJSON = "stream-json"
}

public struct RunOptions: Sendable, Equatable {
    public var prompt = ""
    /// `--cwd` as given (the caller checks and resolves it).
    public var cwd: String?
    public var system: String?
    public var systemFile: String?
    public var timeoutSeconds: Double = 120
    public var backend: BackendChoice = .auto
    public var baseURL: String = RunOptions.defaultBaseURL
    /// True when the endpoint or model came from an option or the environment (`auto` uses openai only then).
    public var openAIConfigured = false
    public var model: String?
    public var apiKey: String?
    public var outputFormat: OutputFormat = .text
    public var maxTurns = 16
    public var readOnly = false
    public var noCommands = false
    /// `--no-tools`: no tool at all, a plain answer (apple-flow's `apple_foundation_models` tool).
    public var noTools = false
    /// `--mcp-config FILE`: MCP servers whose tools are offered too (`mcp__<server>__<tool>`).
    public var mcpConfig: String?
    /// `--temperature`, `--max-tokens`.
    public var sampling = Sampling()
    /// `--context-tokens`; nil means the model's window.
    public var contextTokens: Int?
    public var plan = false
    public var maxSubtasks = RunOptions.defaultMaxSubtasks
    public var parallel = false
    /// `--verify CMD`: the check a final answer must pass; `--verify-rounds`: repair rounds it allows.
    public var verify: String?
    public var verifyRounds = VerifyCheck.defaultRounds
    /// `--fallback-openai`: go on with the configured OpenAI-compatible server when Apple's model stays rate-limited.
    public var fallbackOpenAI = false
    public var verbose = false
    /// `--hide` (in order), then `APPLE_CODE_HIDE`'s paths: more paths commands and tools may not read.
    public var hide: [String] = []
    /// `--deny-port`: loopback ports commands may not connect to (the daemon's web page).
    public var deniedPorts: [Int] = []

    public static let defaultBaseURL = "http://127.0.0.1:11434/v1"
    public static let defaultMaxSubtasks = 5
    public static let maxSubtasksCap = 20

    public init() {}
}

public enum Command: Sendable, Equatable {
    case help
    case version
    /// `--check`: availability only, no prompt.
    case check(RunOptions)
    /// `--sandbox-check`: the command sandbox's self-test, no prompt (with the run's `--hide` and `--deny-port`).
    case sandboxCheck(RunOptions)
    case run(RunOptions)
}

public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Where the prompt comes from when the command line does not give it.
public struct PromptSource: Sendable {
    public var stdinIsTerminal: Bool
    /// Reads all of standard input; nil when it is not valid UTF-8.
    public var readAll: @Sendable () -> String?

    public init(stdinIsTerminal: Bool, readAll: @escaping @Sendable () -> String?) {
        self.stdinIsTerminal = stdinIsTerminal
        self.readAll = readAll
    }
}

/// What giving an option does.
public enum OptionEffect: Sendable {
    /// Turns a switch of the run on.
    case flag(WritableKeyPath<RunOptions, Bool> & Sendable)
    /// Takes a value (shown as the placeholder, e.g. `DIR` or `auto|fm|openai`), checks it and stores it.
    case value(String, @Sendable (String, inout RunOptions) throws -> Void)
    /// Asks for something other than a run.
    case command(CommandOption)
}

/// The options that ask for something other than a run, strongest first: with several, the first one wins.
public enum CommandOption: Sendable, Equatable, CaseIterable {
    case help, version, sandboxCheck, check
}

/// One option of the command line, declared once.
public struct OptionSpec: Sendable {
    public let name: String
    /// Other spellings (`-h`); the usage text lists them after the name, the contract only the name.
    public let aliases: [String]
    public let help: String
    public let effect: OptionEffect

    public init(_ name: String, aliases: [String] = [], _ effect: OptionEffect, help: String) {
        self.name = name
        self.aliases = aliases
        self.help = help
        self.effect = effect
    }

    /// The value's placeholder; nil for an option that takes none.
    public var value: String? {
        if case .value(let placeholder, _) = effect { return placeholder }
        return nil
    }

    /// `--name VALUE` as the usage text and the contract write it.
    public var synopsis: String { value.map { "\(name) \($0)" } ?? name }
}

public enum OptionParser {
    /// Every option apple-code takes, in the order the usage text lists them.
    public static let options: [OptionSpec] = [
        OptionSpec("--cwd", .value("DIR") { value, options in
            // Empty (an unset variable in `--cwd "$WS"`) would silently mean the current directory.
            guard !value.isEmpty else { throw UsageError("--cwd must not be empty") }
            options.cwd = value
        }, help: "workspace (default: current directory)"),
        OptionSpec("--system", .value("TEXT") { value, options in options.system = value },
                   help: "extra instructions after the built-in ones"),
        OptionSpec("--system-file", .value("PATH") { value, options in options.systemFile = value },
                   help: "extra instructions read from a file, after the built-in ones"),
        OptionSpec("--timeout", .value("SECONDS") { value, options in
            // Capped at about 31 years so the deadline arithmetic cannot overflow.
            guard let seconds = Double(value), seconds.isFinite, seconds > 0, seconds <= 1e9 else {
                throw UsageError("--timeout must be a positive number of seconds (at most 1e9), got '\(value)'")
            }
            options.timeoutSeconds = seconds
        }, help: "wall-clock limit for the run (default 120; exit 124)"),
        OptionSpec("--backend", .value(BackendChoice.allCases.map(\.rawValue).joined(separator: "|")) { value, options in
            guard let backend = BackendChoice(rawValue: value) else {
                throw UsageError("--backend must be auto, fm or openai, got '\(value)'")
            }
            options.backend = backend
        }, help: "model backend (default auto)"),
        OptionSpec("--base-url", .value("URL") { value, options in
            guard value.hasPrefix("http://") || value.hasPrefix("https://") else {
                throw UsageError("--base-url must start with http:// or https://, got '\(value)'")
            }
            options.baseURL = value
            options.openAIConfigured = true
        }, help: "OpenAI-compatible endpoint (env APPLE_CODE_BASE_URL, default \(RunOptions.defaultBaseURL))"),
        OptionSpec("--model", .value("NAME") { value, options in
            guard !value.isEmpty else { throw UsageError("--model must not be empty") }
            options.model = value
            options.openAIConfigured = true
        }, help: "model name (env APPLE_CODE_MODEL)"),
        OptionSpec("--api-key", .value("KEY") { value, options in options.apiKey = value },
                   help: "bearer token (env APPLE_CODE_API_KEY)"),
        OptionSpec("--output-format", .value(OutputFormat.allCases.map(\.rawValue).joined(separator: "|")) {
            value, options in
            guard let format = OutputFormat(rawValue: value) else {
                throw UsageError("--output-format must be text, json or stream-json, got '\(value)'")
            }
            options.outputFormat = format
        }, help: "what standard output carries (default text)"),
        OptionSpec("--max-turns", .value("N") { value, options in
            options.maxTurns = try positiveInt("--max-turns", value)
        }, help: "model requests before the run stops (default 16; exit 1)"),
        OptionSpec("--read-only", .flag(\.readOnly), help: "only readFile, listDirectory, searchFiles, searchContent"),
        OptionSpec("--no-commands", .flag(\.noCommands), help: "runCommand is not offered"),
        OptionSpec("--no-tools", .flag(\.noTools), help: "no tool is offered: the model only answers"),
        OptionSpec("--temperature", .value("T") { value, options in
            guard let temperature = Double(value), temperature >= 0, temperature <= 2 else {
                throw UsageError("--temperature must be a number from 0 to 2, got '\(value)'")
            }
            options.sampling.temperature = temperature
        }, help: "sampling temperature (default: openai 0, fm the framework's)"),
        OptionSpec("--max-tokens", .value("N") { value, options in
            options.sampling.maxTokens = try positiveInt("--max-tokens", value)
        }, help: "at most N tokens a response (default: the answer reserve, an eighth of the budget)"),
        OptionSpec("--mcp-config", .value("FILE") { value, options in
            guard !value.isEmpty else { throw UsageError("--mcp-config must not be empty") }
            options.mcpConfig = value
        }, help: "MCP servers (the mcpServers JSON of Claude Code and others) whose tools are offered too, as "
            + "mcp__<server>__<tool>"),
        OptionSpec("--context-tokens", .value("N") { value, options in
            options.contextTokens = try positiveInt("--context-tokens", value)
        }, help: "budget of one request (default: the model's window, 4096)"),
        OptionSpec("--plan", .flag(\.plan), help: "plan-and-execute in fresh context windows"),
        OptionSpec("--max-subtasks", .value("N") { value, options in
            options.maxSubtasks = min(try positiveInt("--max-subtasks", value), RunOptions.maxSubtasksCap)
        }, help: "with --plan: subtasks at most (default \(RunOptions.defaultMaxSubtasks), cap \(RunOptions.maxSubtasksCap))"),
        OptionSpec("--parallel", .flag(\.parallel), help: "with --plan and --read-only only: workers run at once"),
        OptionSpec("--verify", .value("CMD") { value, options in
            guard value.contains(where: { !$0.isWhitespace }) else { throw UsageError("--verify must not be empty") }
            options.verify = value
        }, help: "a command that decides whether the task is done: run in the workspace (runCommand's sandbox) "
            + "after the final answer; a failure goes back to the model (exit 5 when it still fails)"),
        OptionSpec("--verify-rounds", .value("N") { value, options in
            guard let rounds = Int(value), rounds >= 0 else {
                throw UsageError("--verify-rounds must be a whole number, 0 or more, got '\(value)'")
            }
            options.verifyRounds = rounds
        }, help: "with --verify: times a failing check goes back to the model (default \(VerifyCheck.defaultRounds))"),
        OptionSpec("--fallback-openai", .flag(\.fallbackOpenAI),
                   help: "when Apple's model stays rate-limited after its retries, go on with the configured "
                       + "OpenAI-compatible server (--base-url / --model or their environment variables)"),
        OptionSpec("--hide", .value("PATH") { value, options in
            guard !value.isEmpty else { throw UsageError("--hide must not be empty") }
            options.hide.append(value)
        }, help: "a path commands and file tools may not read (repeatable; also env APPLE_CODE_HIDE, ':'-separated)"),
        OptionSpec("--deny-port", .value("PORT") { value, options in
            guard let port = Int(value), (1...65535).contains(port) else {
                throw UsageError("--deny-port must be a port number (1-65535), got '\(value)'")
            }
            options.deniedPorts.append(port)
        }, help: "a loopback port commands may not connect to, e.g. a web page's (repeatable)"),
        OptionSpec("--check", .command(.check), help: "print backend availability as JSON; exit 0 or 3"),
        OptionSpec("--sandbox-check", .command(.sandboxCheck), help: "test the command sandbox here; exit 0 or 1"),
        OptionSpec("--verbose", .flag(\.verbose), help: "diagnostics on stderr"),
        OptionSpec("--version", .command(.version), help: "print the version"),
        OptionSpec("--help", aliases: ["-h"], .command(.help), help: "print this text"),
    ]

    public static let usage = renderUsage()

    private static let byName: [String: OptionSpec] = Dictionary(
        uniqueKeysWithValues: options.flatMap { spec in ([spec.name] + spec.aliases).map { ($0, spec) } })

    /// The `--output-format` the parser would take (the last valid one before `--`; values of other options are
    /// skipped as the parser skips them): a usage error elsewhere on the command line still gets its `result`
    /// event in the requested format.
    public static func requestedFormat(_ arguments: [String]) -> OutputFormat {
        var format = OutputFormat.text
        var index = 0
        while index < arguments.count, arguments[index] != "--" {
            let argument = arguments[index]
            index += 1
            if argument.hasPrefix("--output-format=") {
                format = OutputFormat(rawValue: String(argument.dropFirst("--output-format=".count))) ?? format
            } else if byName[argument]?.value != nil, index < arguments.count {
                if argument == "--output-format" { format = OutputFormat(rawValue: arguments[index]) ?? format }
                index += 1
            }
        }
        return format
    }

    /// Parses `arguments` (without the program name).
    public static func parse(_ arguments: [String], environment: [String: String],
                             prompt source: PromptSource) -> Result<Command, UsageError> {
        do {
            return .success(try parseThrowing(arguments, environment: environment, source: source))
        } catch let error as UsageError {
            return .failure(error)
        } catch {
            return .failure(UsageError("\(error)"))
        }
    }

    private static func parseThrowing(_ arguments: [String], environment: [String: String],
                                      source: PromptSource) throws -> Command {
        var options = RunOptions()
        var positionals: [String] = []
        var commands: Set<CommandOption> = []
        var given: Set<String> = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                positionals.append(contentsOf: arguments[index...])
                break
            }
            guard argument.hasPrefix("-"), argument != "-" else {
                positionals.append(argument)
                continue
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let spec = byName[name] else {
                throw UsageError("unknown option \(argument) (a prompt that starts with '-' goes after '--')")
            }
            given.insert(spec.name)
            switch spec.effect {
            case .flag(let field):
                guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
                options[keyPath: field] = true
            case .command(let command):
                guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
                commands.insert(command)
            case .value(_, let store):
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError("\(name) needs a value") }
                    value = arguments[index]
                    index += 1
                }
                try store(value, &options)
            }
        }

        if commands.contains(.help) { return .help }
        if commands.contains(.version) { return .version }
        if let hide = environment["APPLE_CODE_HIDE"] {
            options.hide += hide.split(separator: ":").map(String.init).filter { !$0.isEmpty }
        }
        if commands.contains(.sandboxCheck) { return .sandboxCheck(options) }

        // Environment defaults for what the command line left open.
        if options.model == nil, let model = environment["APPLE_CODE_MODEL"], !model.isEmpty {
            options.model = model
            options.openAIConfigured = true
        }
        if !given.contains("--base-url"), let url = environment["APPLE_CODE_BASE_URL"], !url.isEmpty {
            options.baseURL = url
            options.openAIConfigured = true
        }
        if options.apiKey == nil, let key = environment["APPLE_CODE_API_KEY"], !key.isEmpty {
            options.apiKey = key
        }

        if given.contains("--max-subtasks") && !options.plan { throw UsageError("--max-subtasks needs --plan") }
        if options.parallel && !options.plan { throw UsageError("--parallel needs --plan") }
        if given.contains("--verify-rounds") && options.verify == nil {
            throw UsageError("--verify-rounds needs --verify")
        }
        if options.noTools && (options.verify != nil || options.plan) {
            throw UsageError("--no-tools cannot go with --verify or --plan: a run without tools can neither repair a "
                + "check nor carry out subtasks")
        }
        if options.verify != nil && options.readOnly {
            throw UsageError("--verify needs a run that may change files: a --read-only run could not repair a failing "
                + "check")
        }
        if options.parallel && !options.readOnly {
            throw UsageError("--parallel is allowed only with --read-only (workers would edit one workspace at once)")
        }

        if options.fallbackOpenAI && !options.openAIConfigured {
            throw UsageError("--fallback-openai needs an OpenAI-compatible server: give --base-url or --model (or set "
                + "APPLE_CODE_BASE_URL / APPLE_CODE_MODEL)")
        }
        if options.fallbackOpenAI && options.backend == .openai {
            throw UsageError("--fallback-openai is for Apple's model (--backend auto or fm), not --backend openai")
        }

        if commands.contains(.check) { return .check(options) }

        guard positionals.count <= 1 else {
            throw UsageError("expected one PROMPT argument, got \(positionals.count) (quote the prompt)")
        }
        let prompt: String
        if let given = positionals.first, given != "-" {
            prompt = given
        } else if positionals.first == "-" || !source.stdinIsTerminal {
            guard let text = source.readAll() else { throw UsageError("standard input is not valid UTF-8") }
            prompt = text
        } else {
            throw UsageError("no prompt: give PROMPT, or `-` to read it from standard input")
        }
        guard prompt.contains(where: { !$0.isWhitespace }) else { throw UsageError("the prompt is empty") }
        options.prompt = prompt
        return .run(options)
    }

    private static func positiveInt(_ name: String, _ value: String) throws -> Int {
        guard let number = Int(value), number > 0 else {
            throw UsageError("\(name) must be a positive whole number, got '\(value)'")
        }
        return number
    }

    /// Help starts in this column; an option written wider than it puts its help on the next line.
    private static let helpColumn = 33
    private static let width = 112

    /// One line an option (`  --name VALUE, -alias   help`), help wrapped and indented to `helpColumn`.
    private static func renderUsage() -> String {
        var lines = [
            "usage: apple-code [OPTIONS] [--] [PROMPT]",
            "",
            "Runs a coding task with tools confined to a workspace. PROMPT `-` (or no PROMPT with stdin not a",
            "terminal) reads the prompt from standard input.",
            "",
            "Options:",
        ]
        let indent = String(repeating: " ", count: helpColumn)
        for spec in options {
            let left = "  " + ([spec.synopsis] + spec.aliases).joined(separator: ", ")
            var help = wrap(spec.help, width: width - helpColumn)
            if left.count < helpColumn - 1 {
                lines.append(left + String(repeating: " ", count: helpColumn - left.count) + help.removeFirst())
            } else {
                lines.append(left)
            }
            lines += help.map { indent + $0 }
        }
        lines += [
            "",
            "Exit codes: 0 answer, 1 run failed, 2 usage, 3 no model, 4 budget cannot be met, 5 the --verify check",
            "still fails, 124 timeout, 130 interrupted.",
        ]
        return lines.joined(separator: "\n")
    }

    private static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        lines.append(line)
        return lines
    }
}
