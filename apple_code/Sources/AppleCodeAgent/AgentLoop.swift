import AppleCodeCore

/// One model request. Implementations throw `AgentError` for what the user must see (server down, HTTP error,
/// bad body) and honour task cancellation. `onText` gets the reply's text as it is generated, in pieces, in order
/// (all at once from a model that does not stream); the reply returned holds all of it.
public protocol ChatModel: Sendable {
    func complete(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply
}

/// The agent loop for backends without their own (the OpenAI-compatible one): ask the model, run the tools it
/// calls, feed the results back, until it answers. Every request is fitted to the budget first.
public struct AgentLoop: Sendable {
    public var model: any ChatModel
    public var style: ToolResultStyle
    /// Switch to folded tool results when the model repeats a call right after its result was sent as a tool
    /// message: the server most likely dropped that message (llama.cpp's chatml-function-calling does).
    public var detectDroppedToolMessages: Bool
    /// The server's tokenizer, where it has one: with the server's `usage.prompt_tokens` it makes the budget
    /// exact (see `PromptCalibration`). Nil: requests are estimated, corrected by the server's usage if it reports.
    public var counter: (any TokenCounter)?

    /// Calls of one reply that are run; the next gets one error result for all the rest, which are left out.
    public static let maxCallsPerReply = 8

    /// The first request of a task requires a call to a tool that looks (`ChatRequest.mustCallOneOf`), where the
    /// server is known to take that tool choice (apple-flow's local model server).
    public var looksFirst: Bool

    public init(model: any ChatModel, style: ToolResultStyle = .toolMessages, detectDroppedToolMessages: Bool = true,
                counter: (any TokenCounter)? = nil, looksFirst: Bool = false) {
        self.model = model
        self.style = style
        self.detectDroppedToolMessages = detectDroppedToolMessages
        self.counter = counter
        self.looksFirst = looksFirst
    }

    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        var run = LoopRun(loop: self, request: request, events: events)
        return try await run.run()
    }
}

/// What the model is told in tool results. Requests for an answer carry no words of ours at all (small models
/// echo them): they offer no tools and end with the user's own message.
enum LoopText {
    /// Information, not an instruction: small models repeat instructions back.
    static let repeatedCall = "[the same call as before: its earlier result, not run again]"

    static func tooManyCalls(made: Int) -> String {
        "Error: this reply made \(made) tool calls; only the first \(AgentLoop.maxCallsPerReply) were run and the "
            + "other \(made - AgentLoop.maxCallsPerReply) were not. Make at most \(AgentLoop.maxCallsPerReply) calls "
            + "a reply."
    }

    static func unknownTool(_ name: String, tools: [String]) -> String {
        let names = tools.isEmpty ? "(none)" : tools.joined(separator: ", ")
        return "unknown tool '\(name)'. The tools are: \(names)."
    }
}

/// Why the run stops offering tools and asks for the answer.
private enum AnswerReason {
    case empty, repeated(String), lastTurn, time(seconds: Int), overflow

    var notice: String {
        switch self {
        case .empty: "the model gave an empty answer"
        case .repeated(let name): "the model made the same \(name) call a third time"
        case .lastTurn: "one model turn of --max-turns is left"
        case .time(let seconds): "\(seconds) s of --timeout are left, too few for another tool round"
        case .overflow: "the server refused a request with tools for its context length again, after it was shrunk"
        }
    }
}

private struct LoopRun {
    let loop: AgentLoop
    let request: AgentRequest
    let events: any EventSink
    let specs: [ToolSpec]
    /// The offered tools that look (read, list, search, run): what the first request may be made to call.
    let lookingTools: [String]
    var style: ToolResultStyle
    var entries: [ChatEntry]
    var progress = RunProgress()
    var partial = ""
    var replyShown = false
    var memory = CallMemory()
    /// The files this run has read or written: edits go only to those (`SeenFiles`).
    var seen: SeenFiles
    var lastCallKey: String?
    var lastCallFollowedToolMessage = false
    /// Set once tools are no longer offered (at most once a run, and again after a `--verify` repair): the reason.
    var answerRequested: AnswerReason?
    var generatedIDs = 0
    /// The longest a model request has taken in this run: the time another tool round may need.
    var slowest: Duration = .zero
    /// How big requests are, what replies cost, what the server's counts taught (its own job: `RequestAccounting`).
    var accounting: RequestAccounting
    /// `--verify`: the check each final answer must pass, and the history entry of its latest failure.
    var verification: Verification?
    var feedbackEntry: Int?
    /// A `--verify` repair round has begun and its first reply is still to come: that request requires a call
    /// (where the server takes a required tool choice), since a round exists to change something and small models
    /// otherwise answer the failure in prose.
    var repairMustAct = false
    /// The server's context-length refusals and the limit requests are fitted to since.
    var overflow: OverflowRecovery

    var budget: ContextBudget { accounting.budget }
    /// What requests are fitted to: `--context-tokens`, lower after a refusal.
    var limit: Int { overflow.limit }

    init(loop: AgentLoop, request: AgentRequest, events: any EventSink) {
        self.loop = loop
        self.request = request
        self.events = events
        self.specs = request.tools.map(\.spec)
        self.lookingTools = specs.map(\.name).filter { ToolSpec.readOnlyNames.contains($0) || $0 == "runCommand" }
        let budget = ContextBudget(contextTokens: request.contextTokens, instructions: request.instructions, tools: specs)
        self.accounting = RequestAccounting(budget: budget, counter: loop.counter)
        self.style = loop.style
        self.entries = [.user(request.prompt)]
        self.seen = SeenFiles(workspace: request.workspace)
        for path in request.taskFilesShown { seen.noteRead(path) }  // shown with the task: as good as read
        self.verification = request.verify
        self.overflow = OverflowRecovery(limit: budget.contextTokens, floor: budget.answerReserve * 2)
    }

    mutating func run() async throws -> AgentAnswer {
        do {
            try budget.check(task: request.prompt)
            request.log("budget: context \(budget.contextTokens), instructions \(budget.instructionTokens), "
                + "tool definitions \(budget.toolTokens), answer reserve \(budget.answerReserve) estimated tokens")
            return try await checkedAnswer()
        } catch var error as AgentError {
            error.progress.merge(progress)
            if error.partialAnswer.isEmpty { error.partialAnswer = partial }
            throw error
        } catch {
            let timedOut = request.deadline.map { ContinuousClock.now >= $0 } ?? false
            if timedOut || Task.isCancelled || error is CancellationError {
                let outcome: RunOutcome = timedOut ? .timeout : .interrupted
                throw AgentError(outcome, timedOut ? "the run timed out" : "the run was interrupted",
                                 partialAnswer: partial, progress: progress)
            }
            throw AgentError(.backendError, "\(error)", partialAnswer: partial, progress: progress)
        }
    }

    private var maxTurnsError: AgentError {
        AgentError(.maxTurns, "stopped after --max-turns \(request.maxTurns) model turns without a final answer; "
            + "raise --max-turns or narrow the task")
    }

    /// The loop's answer once the `--verify` check passes: a failing check goes back to the model with the tools
    /// while rounds, turns and time are left (a repair needs two turns: one with tools, one to answer).
    private mutating func checkedAnswer() async throws -> AgentAnswer {
        while true {
            let answer = try await loopTurns()
            guard var verification else { return answer }
            let turnsLeft = request.maxTurns - progress.turns
            let verdict = await verification.verify(
                deadline: request.deadline, events: events, feedbackTokens: feedbackTokens(),
                cannotRepair: turnsLeft < 2 ? "--max-turns \(request.maxTurns) leaves no turns for another" : nil,
                changedFiles: !progress.filesChanged.isEmpty)
            self.verification = verification
            progress.verify = verification.report
            try Task.checkCancellation()
            switch verdict {
            case .passed:
                return AgentAnswer(text: answer.text, progress: progress)
            case .failed(let message):
                if let fixed = await tryShownCode(answer) { return fixed }
                throw AgentError(.verify, message, partialAnswer: answer.text)
            case .repair(let feedback):
                if let fixed = await tryShownCode(answer) { return fixed }
                repair(feedback, after: answer.text)
            }
        }
    }

    /// The check failed on an answer that may show its fix instead of making it: the code it shows, tried with the
    /// check deciding (`ShownCodeTrial`), on the files the run read or wrote and those named. Nil when nothing
    /// passed.
    private mutating func tryShownCode(_ answer: AgentAnswer) async -> AgentAnswer? {
        guard var verification, let trial = ShownCodeTrial(request: request, events: events) else { return nil }
        let fixed = await trial.run(answer: answer.text, touched: seen.paths, verification: &verification,
                                    nextCall: { generatedIDs += 1; return generatedIDs },
                                    record: { progress.record($0) })
        guard let fixed else { return nil }
        self.verification = verification
        progress.verify = verification.report
        return AgentAnswer(text: fixed, progress: progress)
    }

    /// A repair round: the answer the check rejected, then the check's failure as a user message (an earlier one
    /// shrinks to a line), tools offered again, and results remembered before it forgotten (the check may have
    /// changed files).
    private mutating func repair(_ feedback: String, after answer: String) {
        let round = verification?.report.rounds ?? 1
        request.log("verify: the check failed; repair round \(round) of \(verification?.check.rounds ?? round)")
        if let earlier = feedbackEntry, case .user(let text) = entries[earlier] {
            entries[earlier] = .user(String(text.prefix { $0 != "\n" }) + " (its output is replaced by a newer run below)")
        }
        if !answer.isEmpty { entries.append(.assistant(text: answer, calls: [])) }
        feedbackEntry = entries.count
        entries.append(.user(feedback))
        answerRequested = nil
        memory = CallMemory()
        lastCallKey = nil
        repairMustAct = true
    }

    /// What the check's failure may take in the history: half of what the window leaves beside the instructions,
    /// the tools, the answer reserve and the task, and at most a quarter of the window.
    private func feedbackTokens() -> Int {
        let room = budget.contextTokens - budget.fixedTokens - budget.answerReserve
            - TokenEstimator.estimate(request.prompt) - 64
        return max(64, min(room / 2, budget.contextTokens / 4))
    }

    private mutating func loopTurns() async throws -> AgentAnswer {
        while true {
            try Task.checkCancellation()
            if let deadline = request.deadline, ContinuousClock.now >= deadline { throw CancellationError() }
            guard progress.turns < request.maxTurns else { throw maxTurnsError }
            if answerRequested == nil, let reason = wrapUpReason() { requestAnswer(reason) }
            let (chat, figure) = try await fittedRequest()
            progress.turns += 1
            await accounting.noteKind(figure, chat, turn: progress.turns, log: request.log)
            request.log("request \(progress.turns): \(figure.total) of \(budget.contextTokens) \(figure.kind.rawValue) "
                + "tokens (tools \(chat.tools.isEmpty ? 0 : budget.toolTokens) estimated, answer reserve "
                + "\(chat.maxTokens)), \(style.rawValue) results")
            let reply: ChatReply
            do {
                reply = try await ask(chat, figure)
                repairMustAct = false
            } catch let overflow as ContextOverflow {
                if let ended = try recover(from: overflow, figure) { return ended }
                continue
            }
            if let reason = answerRequested {
                // No tools were offered: only words answer.
                if !reply.text.isEmpty { return AgentAnswer(text: reply.text, progress: progress) }
                if case .lastTurn = reason { throw maxTurnsError }
                if reply.calls.isEmpty {
                    request.log("reply \(progress.turns): empty; the run ends without an answer")
                    return AgentAnswer(text: "", progress: progress)
                }
                throw AgentError(.backendError, "the model kept calling tools after it was asked for its answer")
            }
            if reply.calls.isEmpty {
                if !reply.text.isEmpty { return AgentAnswer(text: reply.text, progress: progress) }
                // No answer: one plain-words request, when --max-turns leaves room for it.
                guard progress.turns < request.maxTurns else {
                    request.log("reply \(progress.turns): empty; the run ends without an answer")
                    return AgentAnswer(text: "", progress: progress)
                }
                requestAnswer(.empty)
                continue
            }
            if let repeated = try await runCalls(of: reply) { requestAnswer(.repeated(repeated)) }
        }
    }

    /// A request the server refused for its context length (`OverflowRecovery` decides what follows): sent again
    /// smaller, then asked for a plain answer without tools; after that the run ends, with an empty answer when it
    /// changed files or ran commands (that work is done, and exit 1 would report it as failed), else as a backend
    /// error that says what to do.
    private mutating func recover(from refusal: ContextOverflow, _ figure: RequestFigure) throws -> AgentAnswer? {
        let server = "the server refused a request for its context length (\(refusal.message))"
        request.log("request \(progress.turns): \(server); it was \(figure.total) \(figure.kind.rawValue) tokens of "
            + "a limit of \(limit)")
        switch overflow.refused(figure: figure.total, asking: answerRequested != nil) {
        case .retry:
            let message = "\(server); the history is condensed to \(limit) tokens and the request sent again"
            request.log(message)
            events.notice(message)
        case .askForAnswer:
            events.notice("\(server); the history is condensed to \(limit) tokens")
            requestAnswer(.overflow)
        case .giveUp:
            let message = "\(server); even a plain answer request, shrunk, was refused"
            guard progress.filesChanged.isEmpty && progress.commandsRun == 0 else {
                request.log(message + "; the run ends without an answer (files were changed or commands run)")
                events.notice(message + "; ending without an answer")
                return AgentAnswer(text: "", progress: progress)
            }
            throw AgentError(.backendError, message + ". Start the server with a larger context (llama.cpp: -c / "
                + "--n_ctx; Ollama: num_ctx) or give apple-code a smaller --context-tokens")
        }
        return nil
    }

    /// One request: its text shown as it comes, its duration and tokens counted, a call written as text taken
    /// as that call.
    private mutating func ask(_ chat: ChatRequest, _ figure: RequestFigure) async throws -> ChatReply {
        var relay = TextRelay()
        replyShown = false
        let model = loop.model
        let started = ContinuousClock.now
        var reply = try await model.complete(chat) { piece in show(relay.pass(piece)) }
        slowest = max(slowest, ContinuousClock.now - started)
        await accounting.account(chat, figure, reply, turn: progress.turns, usage: &progress.usage, log: request.log)
        if reply.calls.isEmpty, let written = TextToolCall.parse(reply.text, tools: request.tools.map(\.name),
                                                                 unknownNames: !chat.tools.isEmpty) {
            request.log("reply \(progress.turns): the model wrote a \(written.name) call as text instead of a "
                + "structured tool call; taken as that call")
            reply = ChatReply(text: "", calls: [written])
        } else {
            show(relay.release())
        }
        return reply
    }

    /// Text of the reply as it comes, as `text` events (a reply after an earlier one's text starts on a new line);
    /// `partial` keeps all of it for a run that is cut off.
    private mutating func show(_ text: String) {
        guard !text.isEmpty else { return }
        let shown = (!replyShown && !partial.isEmpty ? "\n" : "") + text
        replyShown = true
        events.emit(.text(delta: shown))
        partial += shown
    }

    /// Ask for the answer before the next tool round when that round would be the run's last turn, or when less
    /// time is left than twice the slowest request so far (a tool round, then its answer). Never before the
    /// first request: the task gets its tools.
    private func wrapUpReason() -> AnswerReason? {
        guard progress.turns > 0 else { return nil }
        if progress.turns == request.maxTurns - 1 { return .lastTurn }
        if let deadline = request.deadline {
            let left = deadline - ContinuousClock.now
            if left < slowest * 2 { return .time(seconds: Int(left.seconds.rounded())) }
        }
        return nil
    }

    /// From now on, requests offer no tools, show no calls (their results stay, folded into user messages) and
    /// end with the user's own message (its start, if long): no words of ours the model could echo.
    private mutating func requestAnswer(_ reason: AnswerReason) {
        answerRequested = reason
        let message = reason.notice + "; asking for a plain-words answer without tools"
        request.log("reply \(progress.turns): " + message)
        events.notice(message)
        if entries.last != .user(request.prompt) { entries.append(.user(Self.start(of: request.prompt))) }
    }

    /// The longest start of `text` within 200 estimated tokens, cut at a character.
    private static func start(of text: String) -> String {
        guard TokenEstimator.estimate(text) > 200 else { return text }
        var kept = ""
        var units = 0
        for character in text {
            units += TokenEstimator.estimate(String(character)) - 1
            if units > 199 { break }
            kept.append(character)
        }
        return kept
    }

    // MARK: tool calls

    /// Records the reply's calls in the history and runs them: at most `maxCallsPerReply` (the next gets one
    /// error result for the rest, which are left out), names kept short. Stops at a call made a third time and
    /// returns its name (that call and the ones after it are left out).
    private mutating func runCalls(of reply: ChatReply) async throws -> String? {
        var calls = reply.calls.prefix(AgentLoop.maxCallsPerReply + 1).map { call in
            var call = call.withBoundedName
            if call.id.isEmpty {
                generatedIDs += 1
                call.id = "c\(generatedIDs)"
            }
            return call
        }
        if reply.calls.count > calls.count {
            request.log("reply \(progress.turns): \(reply.calls.count) tool calls; the first "
                + "\(AgentLoop.maxCallsPerReply) run, the next gets an error for the rest, the others are left out")
        }
        let assistant = entries.count
        entries.append(.assistant(text: reply.text, calls: calls))
        for (index, call) in calls.enumerated() {
            try Task.checkCancellation()
            if index == AgentLoop.maxCallsPerReply {
                announce(call, arguments: nil)
                record(call, .failure(LoopText.tooManyCalls(made: reply.calls.count)))
                break
            }
            if try await handle(call, callsLeft: calls.count - index) == .repeatedThirdTime {
                calls.removeSubrange(index...)
                entries[assistant] = .assistant(text: reply.text, calls: calls)
                return call.name
            }
        }
        return nil
    }

    private enum Handled { case recorded, repeatedThirdTime }

    private mutating func handle(_ call: ModelToolCall, callsLeft: Int) async throws -> Handled {
        let parsed = Self.parseArguments(call.argumentsText)
        let key = CallMemory.key(name: call.name, arguments: parsed.value, raw: call.argumentsText)
        let times = memory.count(key)
        let consecutive = key == lastCallKey
        lastCallKey = key
        if times >= 3 { return .repeatedThirdTime }
        announce(call, arguments: parsed.value)
        if consecutive, style == .toolMessages, loop.detectDroppedToolMessages, lastCallFollowedToolMessage {
            style = .userMessages
            let message = "the model repeated a call right after its result: the server seems to drop role \"tool\" "
                + "messages; sending tool results as user messages from now on"
            request.log(message)
            events.notice(message)
        }
        if let earlier = memory.earlier(key) {
            var again = earlier
            again.text = earlier.text + "\n\n" + LoopText.repeatedCall
            again.summary = earlier.summary + " (earlier result, not run again)"
            again.filesChanged = []
            again.commandsRun = 0
            request.log("the model made the same \(call.name) call again; it gets the earlier result, not run again")
            record(call, again)
            return .recorded
        }
        let result: ToolResult
        var refused = false
        if let error = parsed.error {
            result = .failure("the arguments of \(call.name) are not valid JSON (\(error)). Send one JSON object, "
                + "for example {\"path\": \"README.md\"}.")
        } else if let refusal = seen.refusal(tool: call.name, arguments: parsed.value) {
            result = .failure(refusal)
            refused = true  // not remembered: the same call, once the file is read, runs
        } else if let tool = request.tools.first(where: { $0.name == call.name }) {
            result = await run(tool, raw: parsed.value ?? .object(JSONObject()), callsLeft: callsLeft)
            seen.note(tool: call.name, arguments: parsed.value, ok: result.ok)
        } else {
            result = .failure(LoopText.unknownTool(call.name, tools: request.tools.map(\.name)))
        }
        progress.record(result)
        if !refused { memory.remember(key, result) }
        record(call, result)
        try Task.checkCancellation()
        return .recorded
    }

    private func announce(_ call: ModelToolCall, arguments: JSONValue?) {
        events.emit(.toolCall(id: call.id, name: call.name, arguments: arguments ?? .string(call.argumentsText)))
    }

    private mutating func record(_ call: ModelToolCall, _ result: ToolResult) {
        events.toolResult(id: call.id, name: call.name, result)
        entries.append(.toolResult(id: call.id, name: call.name, text: result.text,
                                   summary: "\(call.name): \(result.summary)", condensed: false))
        lastCallFollowedToolMessage = style == .toolMessages
    }

    /// Arguments as JSON: empty text is `{}`; a JSON string holding an object (double-encoded) is unwrapped.
    static func parseArguments(_ text: String) -> (value: JSONValue?, error: String?) {
        let trimmed = text.trimmingWhitespace
        if trimmed.isEmpty { return (.object(JSONObject()), nil) }
        do {
            let value = try JSONValue.parseModelWritten(trimmed)
            if case .string(let inner) = value, let unwrapped = try? JSONValue.parseModelWritten(inner),
               unwrapped.objectValue != nil {
                return (unwrapped, nil)
            }
            return (value, nil)
        } catch {
            return (nil, "\(error)")
        }
    }

    /// Runs `tool` with the room the budget leaves it. Where requests are counted exactly, the room is in the
    /// server's tokens: the tool gets it converted at the run's rate, its result is counted and made again or cut
    /// until it fits (`ExactFit`); a read-only tool whose result was cut well short of its room gets one more try
    /// with the budget its own count implies, so the room goes to content rather than to the conversion's margin.
    /// Otherwise the room is in estimated tokens, as the tools count.
    private mutating func run(_ tool: any AgentTool, raw: JSONValue, callsLeft: Int) async -> ToolResult {
        let (room, kind) = await resultRoom(callsLeft: callsLeft)
        var context = ToolContext(workspace: request.workspace, maxResultTokens: max(16, room * 85 / 100),
                                  deadline: request.deadline, log: request.log)
        guard kind == .exact, let counter = loop.counter else {
            var ran = await tool.call(raw: raw, context: context)
            let cut = HistoryLadder.cutForWire(ran.text, tokens: room)
            if cut.truncated {
                ran.text = cut.text
                ran.truncated = true
            }
            return ran
        }
        let count: (String) async -> Int? = { await counter.count($0) }
        var (result, tokens) = await ExactFit.run(tool, raw: raw, context: context, room: room, rate: accounting.rate,
                                                  count: count)
        guard var counted = tokens else { return result }
        if result.truncated, ToolSpec.readOnlyNames.contains(tool.name), counted < room * 9 / 10 {
            let ratio = Double(counted) / Double(max(1, TokenEstimator.estimate(result.text)))
            context.maxResultTokens = max(1, Int(Double(room) / (ratio * (1 + TokenRate.headroom))))
            let again = await tool.call(raw: raw, context: context)
            if let recount = await counter.count(again.text), recount <= room, recount > counted {
                result = again
                counted = recount
            }
        }
        accounting.recordRate(counted: counted, text: result.text)
        return result
    }

    /// Tokens the next tool result may take: what the conversation budget leaves once every older result is
    /// condensed and every call's long arguments are cut (as the fitter will do once the calls have run), shared
    /// among the calls still to run in this turn; in the kind of tokens the request is counted in.
    private func resultRoom(callsLeft: Int) async -> (room: Int, kind: CountKind) {
        let chat = ChatRequest(system: request.instructions, entries: HistoryLadder.lean(entries), tools: specs,
                               maxTokens: budget.answerReserve, style: style)
        let figure = await accounting.figure(chat)
        let wrapper = 48  // the tool message's own JSON and the folded-result heading
        let room = limit - figure.total - wrapper * callsLeft
        return (max(16, room / max(1, callsLeft)), figure.kind)
    }

    // MARK: budget

    /// The next request, taken down the history ladder (`HistoryLadder`) one rung at a time until it fits the
    /// limit; a notice says what was cut. The task is never touched.
    private mutating func fittedRequest() async throws -> (ChatRequest, RequestFigure) {
        var tally = (condensed: 0, shortened: 0, dropped: 0)
        var chat = makeRequest()
        var size = await accounting.figure(chat)
        while size.total > limit {
            if let (lower, rung) = HistoryLadder.step(entries, over: size.total - limit) {
                entries = lower
                tally.condensed += rung.tally.condensed
                tally.shortened += rung.tally.shortened
                tally.dropped += rung.tally.dropped
            } else if size.total <= budget.contextTokens {
                break  // below a limit lowered after a refusal nothing is left to cut; --context-tokens is met
            } else {
                throw AgentError(.context, "the budget cannot be met: the request needs \(size.total) "
                    + "\(size.kind.rawValue) tokens > --context-tokens \(budget.contextTokens) even with the history "
                    + "condensed")
            }
            chat = makeRequest()
            size = await accounting.figure(chat)
        }
        if tally.condensed > 0 || tally.shortened > 0 || tally.dropped > 0 {
            var parts: [String] = []
            if tally.condensed > 0 { parts.append("condensed \(tally.condensed) older tool result(s) to one line each") }
            if tally.shortened > 0 {
                parts.append("cut the long arguments of \(tally.shortened) earlier tool-call message(s)")
            }
            if tally.dropped > 0 { parts.append("dropped \(tally.dropped) older exchange(s)") }
            let message = "context budget: " + parts.joined(separator: ", ")
            request.log(message)
            events.notice(message)
        }
        return (chat, size)
    }

    /// The request for the current conversation. Once an answer is requested it offers no tools and shows no
    /// tool-call structure: small models given tools (and `tool_choice: "auto"`) keep calling them, and without
    /// tools they imitate the calls their template renders as text.
    private func makeRequest() -> ChatRequest {
        let asking = answerRequested != nil
        let first = progress.turns == 0 && !asking && loop.looksFirst && !lookingTools.isEmpty
            && request.taskFilesShown.isEmpty
        let repairing = repairMustAct && !asking && loop.looksFirst && !specs.isEmpty
        return ChatRequest(system: request.instructions, entries: entries, tools: asking ? [] : specs,
                           maxTokens: budget.answerReserve, style: style, plainHistory: asking,
                           mustCallOneOf: first ? lookingTools : repairing ? specs.map(\.name) : nil)
    }
}

extension String {
    var trimmingWhitespace: String { trimmed(of: " \n\r\t") }

    func trimmed(of set: String) -> String {
        var s = Substring(self)
        while let first = s.first, set.contains(first) { s = s.dropFirst() }
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
