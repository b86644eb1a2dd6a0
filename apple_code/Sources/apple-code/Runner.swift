import AppleCodeCore
import AppleCodePlan
import AppleCodeTools
import Foundation

/// One run: workspace and instructions from the options, the backend, the run itself under `--timeout` and the
/// signals, and the final result in the chosen format.
struct Runner {
    let options: RunOptions
    let environment: [String: String]
    let started: ContinuousClock.Instant

    /// Seconds a cancelled run gets to stop its request and kill its commands before the result is written anyway.
    static let stopGrace: Double = 3

    func run() async -> Int32 {
        let output = Output(format: options.outputFormat, verbose: options.verbose)
        let control = RunControl(output: output, started: started, backend: options.backend.rawValue,
                                 model: options.model ?? "", verifyCommand: options.verify)
        let log: @Sendable (String) -> Void = { [output] in output.log($0) }
        do {
            let workspace = try resolveWorkspace()
            let instructions = BuiltInInstructions.combined(with: try extraInstructions())
            let deadline = started + .milliseconds(Int64(options.timeoutSeconds * 1000))
            control.watch(deadline: deadline)
            let backend = try await withFallback(BackendResolver.resolve(options, environment: environment, log: log),
                                                 control: control, log: log)
            control.setBackend(backend.name, model: backend.model)
            var tools = options.noTools
                ? [] : standardTools(readOnly: options.readOnly, allowCommands: !options.noCommands)
            let events = OutputSink(output: output)
            let mcp = try await mcpTools(contextTokens: backend.contextTokens, log: log)
            defer { mcp.shutdown() }
            tools += mcp.tools
            let verify = options.verify.map {
                Verification(CheckCommand.check($0, rounds: options.verifyRounds, workspace: workspace, log: log))
            }
            var configured = AgentRequest(prompt: options.prompt, instructions: instructions, tools: tools,
                                          workspace: workspace, maxTurns: options.maxTurns,
                                          contextTokens: backend.contextTokens, deadline: deadline,
                                          verbose: options.verbose, verify: verify, log: log)
            configured.sampling = options.sampling
            let request = configured
            events.emit(.start(StartInfo(backend: backend.name, model: backend.model, cwd: workspace,
                                         contextTokens: backend.contextTokens, tools: tools.map(\.name))))
            mcp.notices.forEach(events.notice)  // after the start event, which the stream begins with
            let plan = options.plan
            let runner = PlanRunner(backend: backend, maxSubtasks: options.maxSubtasks, parallel: options.parallel)
            let answer = try await control.perform {
                let request = await Self.startingFromTheCheck(Self.withTheTaskFiles(request), events: events)
                return plan ? try await runner.run(request, events: events)
                    : try await backend.run(request, events: events)
            }
            return control.finish(.success, answer.text, progress: answer.progress)
        } catch let error as AgentError {
            return control.finish(error)
        } catch {
            return control.finish(AgentError(.backendError, "\(error)"))
        }
    }

    /// The files the task names go with it (`TaskFiles`), within a quarter of the window; a `--no-tools` run gets
    /// none (it was given no access to the files).
    static func withTheTaskFiles(_ request: AgentRequest) -> AgentRequest {
        guard !request.tools.isEmpty, let workspace = try? Workspace(request.workspace),
              let shown = TaskFiles.shown(task: request.prompt, in: workspace, tokens: request.contextTokens / 4)
        else { return request }
        var request = request
        request.prompt += "\n\n" + shown.text
        request.taskFilesShown = shown.paths
        return request
    }

    /// `--verify`: the check runs once before the work, and a failure's output goes with the task (for the planner
    /// too), within an eighth of the window.
    static func startingFromTheCheck(_ request: AgentRequest, events: any EventSink) async -> AgentRequest {
        guard var verification = request.verify else { return request }
        let failure = await verification.baseline(deadline: request.deadline, events: events,
                                                  feedbackTokens: max(64, request.contextTokens / 8))
        var request = request
        request.verify = verification
        if let failure { request.prompt += "\n\n" + failure }
        return request
    }

    /// `--fallback-openai` on Apple's model: the configured OpenAI-compatible server takes over a run that stays
    /// rate-limited (resolved only then, so a server that is down costs nothing until it is needed).
    private func withFallback(_ backend: any AgentBackend, control: RunControl,
                              log: @escaping @Sendable (String) -> Void) -> any AgentBackend {
        guard options.fallbackOpenAI, backend.name == "fm" else { return backend }
        let (options, environment) = (options, environment)
        return FallbackBackend(primary: backend, fallback: {
            try await BackendResolver.openAI(options, environment: environment, log: log)
        }, onSwitch: { control.setBackend($0, model: $1) })
    }

    /// `--mcp-config`'s servers started and their tools listed (none with `--no-tools`); a bad file is a usage error.
    private func mcpTools(contextTokens: Int, log: @escaping @Sendable (String) -> Void) async throws -> MCPToolSet {
        guard let path = options.mcpConfig, !options.noTools else { return .empty }
        let config: MCPConfig
        do {
            config = try MCPConfig.load(path: path)
        } catch {
            throw AgentError(.usage, "--mcp-config \(path): \(error)")
        }
        return try await MCPToolSet.start(config, readOnly: options.readOnly, contextTokens: contextTokens,
                                          searchPath: environment["PATH"] ?? "/usr/bin:/bin", log: log)
    }

    /// `--cwd` as an absolute path; missing, not a folder, or (unless --read-only) `/`, a home folder or a folder
    /// above one is a usage error.
    private func resolveWorkspace() throws -> String {
        let current = FileManager.default.currentDirectoryPath
        let given = options.cwd ?? current
        let absolute = given.hasPrefix("/") ? given : current + "/" + given
        let path = URL(fileURLWithPath: absolute).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AgentError(.usage, "--cwd \(given): no such folder")
        }
        guard isDirectory.boolValue else { throw AgentError(.usage, "--cwd \(given): not a folder") }
        if !options.readOnly, let problem = CommandSandbox.broadWorkspaceProblem(path) {
            throw AgentError(.usage, "--cwd \(given): \(problem)")
        }
        return path
    }

    /// `--system` then the contents of `--system-file`.
    private func extraInstructions() throws -> String? {
        var parts: [String] = []
        if let system = options.system { parts.append(system) }
        if let file = options.systemFile {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw AgentError(.usage, "--system-file \(file): cannot read it")
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw AgentError(.usage, "--system-file \(file): not UTF-8 text")
            }
            parts.append(text)
        }
        return parts.isEmpty ? nil : parts.joined(separator: "\n\n")
    }
}

/// Ends a run exactly once: on its answer or error, on `--timeout`, or on SIGINT/SIGTERM. A stop cancels the
/// run (its HTTP request and commands stop) and waits a short grace for it to report; the result is written
/// then, whatever the run is doing.
final class RunControl: @unchecked Sendable {
    private let output: Output
    private let started: ContinuousClock.Instant
    private let lock = NSLock()
    private var backend: String
    private var model: String
    private var stopReason: RunOutcome?
    private var task: Task<AgentAnswer, Error>?
    private var timer: Task<Void, Never>?
    private var signalSources: [DispatchSourceSignal] = []
    /// `--verify`: the result always says where the check stands, also when it never ran.
    private let verifyCommand: String?

    init(output: Output, started: ContinuousClock.Instant, backend: String, model: String, verifyCommand: String?) {
        self.output = output
        self.started = started
        self.backend = backend
        self.model = model
        self.verifyCommand = verifyCommand
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.stop(.interrupted) }
            source.resume()
            signalSources.append(source)
        }
    }

    func setBackend(_ backend: String, model: String) {
        lock.lock()
        self.backend = backend
        self.model = model
        lock.unlock()
    }

    func watch(deadline: ContinuousClock.Instant) {
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            if !Task.isCancelled { self?.stop(.timeout) }
        }
        lock.lock()
        self.timer = timer
        lock.unlock()
    }

    /// Runs `body` as a cancellable task; a stop reason set meanwhile wins over what the run threw.
    func perform(_ body: @escaping @Sendable () async throws -> AgentAnswer) async throws -> AgentAnswer {
        let task = Task { try await body() }
        if register(task) { task.cancel() }
        return try await task.value
    }

    /// Keeps the run's task for `stop`; true when a stop already happened.
    private func register(_ task: Task<AgentAnswer, Error>) -> Bool {
        lock.withLock {
            self.task = task
            return stopReason != nil
        }
    }

    func stop(_ reason: RunOutcome) {
        lock.lock()
        guard stopReason == nil else {
            lock.unlock()
            return
        }
        stopReason = reason
        let task = self.task
        lock.unlock()
        output.log(reason == .timeout ? "--timeout expired: stopping the run" : "signal received: stopping the run")
        task?.cancel()
        if task == nil {
            // Still resolving the backend: nothing to wait for.
            exit(finish(AgentError(reason, "")))
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + Runner.stopGrace) { [self] in
            output.log("the run did not stop within \(Runner.stopGrace) s; reporting without it")
            exit(finish(AgentError(reason, "")))
        }
    }

    func finish(_ outcome: RunOutcome, _ text: String, progress: RunProgress) -> Int32 {
        report(outcome, result: text, partial: "", progress: progress)
    }

    /// The result for an error; a stop (timeout, signal) decides the outcome whatever the run threw.
    func finish(_ error: AgentError) -> Int32 {
        lock.lock()
        let reason = stopReason
        lock.unlock()
        let outcome = reason ?? error.outcome
        var message = error.message
        if outcome == .timeout && reason != nil || message.isEmpty && outcome == .timeout {
            message = "timed out: --timeout expired; partial answer reported"
        } else if outcome == .interrupted {
            message = "interrupted by a signal; commands stopped"
        }
        let partial = error.partialAnswer.isEmpty ? output.partialText : error.partialAnswer
        let result = partial.isEmpty ? message : partial + "\n\n(" + message + ")"
        return report(outcome, result: result, partial: partial, progress: error.progress)
    }

    private func report(_ outcome: RunOutcome, result: String, partial: String, progress: RunProgress) -> Int32 {
        var progress = progress
        if let verifyCommand, progress.verify == nil { progress.verify = VerifyReport(command: verifyCommand) }
        lock.lock()
        let report = RunReport(outcome: outcome, result: result,
                               durationMs: Int((ContinuousClock.now - started).seconds * 1000),
                               progress: progress, backend: backend, model: model)
        timer?.cancel()
        lock.unlock()
        if outcome == .timeout || outcome == .interrupted {
            // Children first: a command the cancelled run did not reap yet dies with its whole group.
            CommandRunner.killAllRunning()
        }
        output.finish(report, partial: partial)
        return outcome.exitCode
    }
}
