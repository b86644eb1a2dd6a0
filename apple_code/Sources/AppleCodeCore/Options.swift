/// The command line of `apple-code` (contract: Invocation, Options), parsed into plain values. Parsing reads no
/// file and no stream itself: the caller supplies the environment and the prompt source, so every rule is
/// unit-testable.

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
    /// `--context-tokens`; nil means the model's window.
    public var contextTokens: Int?
    public var plan = false
    public var maxSubtasks = RunOptions.defaultMaxSubtasks
    public var parallel = false
    public var verbose = false

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
    /// `--sandbox-check`: the command sandbox's self-test, no prompt.
    case sandboxCheck
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

public enum OptionParser {
    public static let usage = """
        usage: apple-code [OPTIONS] [--] [PROMPT]

        Runs a coding task with tools confined to a workspace. PROMPT `-` (or no PROMPT with stdin not a
        terminal) reads the prompt from standard input.

          --cwd DIR                      workspace (default: current directory)
          --system TEXT, --system-file PATH
                                         extra instructions after the built-in ones
          --timeout SECONDS              wall-clock limit for the run (default 120; exit 124)
          --backend auto|fm|openai       model backend (default auto)
          --base-url URL                 OpenAI-compatible endpoint (env APPLE_CODE_BASE_URL,
                                         default http://127.0.0.1:11434/v1)
          --model NAME                   model name (env APPLE_CODE_MODEL)
          --api-key KEY                  bearer token (env APPLE_CODE_API_KEY)
          --output-format text|json|stream-json
          --max-turns N                  model/tool round trips (default 16; exit 1)
          --read-only                    only readFile, listDirectory, searchFiles, searchContent
          --no-commands                  runCommand is not offered
          --context-tokens N             budget of one request (default: the model's window, 4096)
          --plan [--max-subtasks N] [--parallel]
                                         plan-and-execute in fresh context windows (N default 5, cap 20;
                                         --parallel only with --read-only)
          --check                        print backend availability as JSON; exit 0 or 3
          --sandbox-check                test the command sandbox here; exit 0 or 1
          --verbose                      diagnostics on stderr
          --version, --help

        Exit codes: 0 answer, 1 run failed, 2 usage, 3 no model, 4 budget cannot be met, 124 timeout,
        130 interrupted.
        """

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
            } else if valueOptions.contains(argument), index < arguments.count {
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

    private static let valueOptions: Set<String> = [
        "--cwd", "--system", "--system-file", "--timeout", "--backend", "--base-url", "--model", "--api-key",
        "--output-format", "--max-turns", "--context-tokens", "--max-subtasks",
    ]
    private static let flagOptions: Set<String> = [
        "--read-only", "--no-commands", "--plan", "--parallel", "--check", "--sandbox-check", "--verbose", "--version",
        "--help", "-h",
    ]

    private static func parseThrowing(_ arguments: [String], environment: [String: String],
                                      source: PromptSource) throws -> Command {
        var options = RunOptions()
        var positionals: [String] = []
        var flags: Set<String> = []
        var maxSubtasksGiven = false
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
            if flagOptions.contains(name) {
                guard inlineValue == nil else { throw UsageError("\(name) takes no value") }
                flags.insert(name == "-h" ? "--help" : name)
                continue
            }
            guard valueOptions.contains(name) else {
                throw UsageError("unknown option \(argument) (a prompt that starts with '-' goes after '--')")
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else { throw UsageError("\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            try apply(name, value, to: &options)
            if name == "--max-subtasks" { maxSubtasksGiven = true }
        }

        if flags.contains("--help") { return .help }
        if flags.contains("--version") { return .version }
        if flags.contains("--sandbox-check") { return .sandboxCheck }
        options.readOnly = flags.contains("--read-only")
        options.noCommands = flags.contains("--no-commands")
        options.plan = flags.contains("--plan")
        options.parallel = flags.contains("--parallel")
        options.verbose = flags.contains("--verbose")

        // Environment defaults for what the command line left open.
        if options.model == nil, let model = environment["APPLE_CODE_MODEL"], !model.isEmpty {
            options.model = model
            options.openAIConfigured = true
        }
        if !baseURLGiven(arguments), let url = environment["APPLE_CODE_BASE_URL"], !url.isEmpty {
            options.baseURL = url
            options.openAIConfigured = true
        }
        if options.apiKey == nil, let key = environment["APPLE_CODE_API_KEY"], !key.isEmpty {
            options.apiKey = key
        }

        if maxSubtasksGiven && !options.plan { throw UsageError("--max-subtasks needs --plan") }
        if options.parallel && !options.plan { throw UsageError("--parallel needs --plan") }
        if options.parallel && !options.readOnly {
            throw UsageError("--parallel is allowed only with --read-only (workers would edit one workspace at once)")
        }

        if flags.contains("--check") { return .check(options) }

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

    private static func baseURLGiven(_ arguments: [String]) -> Bool {
        let options = arguments.prefix { $0 != "--" }
        return options.contains { $0 == "--base-url" || $0.hasPrefix("--base-url=") }
    }

    private static func apply(_ name: String, _ value: String, to options: inout RunOptions) throws {
        switch name {
        case "--cwd":
            // Empty (an unset variable in `--cwd "$WS"`) would silently mean the current directory.
            guard !value.isEmpty else { throw UsageError("--cwd must not be empty") }
            options.cwd = value
        case "--system": options.system = value
        case "--system-file": options.systemFile = value
        case "--timeout":
            // Capped at about 31 years so the deadline arithmetic cannot overflow.
            guard let seconds = Double(value), seconds.isFinite, seconds > 0, seconds <= 1e9 else {
                throw UsageError("--timeout must be a positive number of seconds (at most 1e9), got '\(value)'")
            }
            options.timeoutSeconds = seconds
        case "--backend":
            guard let backend = BackendChoice(rawValue: value) else {
                throw UsageError("--backend must be auto, fm or openai, got '\(value)'")
            }
            options.backend = backend
        case "--base-url":
            guard value.hasPrefix("http://") || value.hasPrefix("https://") else {
                throw UsageError("--base-url must start with http:// or https://, got '\(value)'")
            }
            options.baseURL = value
            options.openAIConfigured = true
        case "--model":
            guard !value.isEmpty else { throw UsageError("--model must not be empty") }
            options.model = value
            options.openAIConfigured = true
        case "--api-key": options.apiKey = value
        case "--output-format":
            guard let format = OutputFormat(rawValue: value) else {
                throw UsageError("--output-format must be text, json or stream-json, got '\(value)'")
            }
            options.outputFormat = format
        case "--max-turns": options.maxTurns = try positiveInt(name, value)
        case "--context-tokens": options.contextTokens = try positiveInt(name, value)
        case "--max-subtasks":
            options.maxSubtasks = min(try positiveInt(name, value), RunOptions.maxSubtasksCap)
        default: throw UsageError("unknown option \(name)")
        }
    }

    private static func positiveInt(_ name: String, _ value: String) throws -> Int {
        guard let number = Int(value), number > 0 else {
            throw UsageError("\(name) must be a positive whole number, got '\(value)'")
        }
        return number
    }
}
