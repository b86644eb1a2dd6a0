import AppleCodeCore
import Foundation

/// One MCP server over stdio: JSON-RPC 2.0, one message a line (the MCP stdio transport). Started as the owner
/// configured it, outside the command sandbox, with only the environment its config names. A server that exits,
/// closes its output or does not answer a request in time is dead for the rest of the run: every later request
/// fails at once with why, so its tools give a clear error and the run goes on.
public final class MCPConnection: @unchecked Sendable {
    public let name: String
    private let process: Process
    private let input: FileHandle
    private let lock = NSLock()
    private var buffer = Data()
    private var pending: [Int: CheckedContinuation<JSONValue, Error>] = [:]
    private var cancelled: Set<Int> = []
    private var nextID = 1
    private var failure: String?

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Starts the server process (not yet initialized: see `initialize`).
    public init(_ config: MCPServerConfig, searchPath: String) throws {
        name = config.name
        process = Process()
        guard let executable = MCPConnection.resolve(config.command, searchPath: searchPath) else {
            throw Failure(description: "command '\(config.command)' not found")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = config.args
        process.environment = config.env
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        input = stdin.fileHandleForWriting
        stdout.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            if data.isEmpty {
                handle.readabilityHandler = nil
                self.fail("closed its output")
            } else {
                self.received(data)
            }
        }
        process.terminationHandler = { [weak self] finished in
            self?.fail("exited (status \(finished.terminationStatus))")
        }
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot start '\(executable)': \(error.localizedDescription)")
        }
    }

    /// The MCP handshake: `initialize`, then `notifications/initialized`.
    public func initialize(timeout: Double) async throws {
        let params: JSONValue = [
            "protocolVersion": "2025-06-18",
            "capabilities": .object(JSONObject()),
            "clientInfo": ["name": "apple-code", "version": .string(AppleCodeVersion.current)],
        ]
        _ = try await request("initialize", params: params, timeout: timeout)
        try send(["jsonrpc": "2.0", "method": "notifications/initialized"])
    }

    /// One request and its `result`; a JSON-RPC `error`, a dead server or no answer within `timeout` throws (and a
    /// timeout kills the server: it is not trusted to answer later).
    public func request(_ method: String, params: JSONValue, timeout: Double) async throws -> JSONValue {
        let id = lock.withLock {
            defer { nextID += 1 }
            return nextID
        }
        let message: JSONValue = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
        return try await withThrowingTaskGroup(of: JSONValue?.self) { group in
            group.addTask { try await self.exchange(id: id, message: message) }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answer = first else {
                fail("did not answer within \(Int(timeout)) s")
                stop()
                throw Failure(description: failureText())
            }
            return answer
        }
    }

    /// Ends the server: the end of its input (a well-behaved stdio server exits on it), SIGTERM, and SIGKILL if it
    /// is still there half a second later. The last is needed: the server inherits the signal mask of the thread
    /// that started it, and libdispatch's threads block SIGTERM, so a server stuck in a call (the one a timeout
    /// stops) never saw it and outlived the run.
    public func stop() {
        try? input.close()
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(0.5)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    // MARK: - internals

    private func exchange(id: Int, message: JSONValue) async throws -> JSONValue {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, Error>) in
                let refused: Error? = lock.withLock {
                    if let failure {
                        return Failure(description: "MCP server '\(name)' \(failure): its tools cannot be used in this run")
                    }
                    if cancelled.remove(id) != nil { return CancellationError() }
                    pending[id] = continuation
                    return nil
                }
                if let refused {
                    continuation.resume(throwing: refused)
                    return
                }
                do {
                    try send(message)
                } catch {
                    fail("cannot be written to (\(error.localizedDescription))")
                }
            }
        } onCancel: {
            let waiting = lock.withLock { () -> CheckedContinuation<JSONValue, Error>? in
                if let found = pending.removeValue(forKey: id) { return found }
                cancelled.insert(id)
                return nil
            }
            waiting?.resume(throwing: CancellationError())
        }
    }

    private func send(_ message: JSONValue) throws {
        try input.write(contentsOf: Data((message.jsonText + "\n").utf8))
    }

    private func received(_ data: Data) {
        var lines: [Data] = []
        lock.withLock {
            buffer.append(data)
            while let end = buffer.firstIndex(of: 0x0A) {
                lines.append(buffer[buffer.startIndex..<end])
                buffer.removeSubrange(buffer.startIndex...end)
            }
        }
        for line in lines {
            guard let text = String(data: line, encoding: .utf8),
                  let message = try? JSONValue.parse(text), message.objectValue != nil else { continue }
            handle(message)
        }
    }

    private func handle(_ message: JSONValue) {
        guard let id = message["id"]?.intValue else { return }  // a notification: nothing to do
        if let method = message["method"]?.stringValue {  // a request from the server
            let reply: JSONValue = method == "ping"
                ? ["jsonrpc": "2.0", "id": .int(id), "result": .object(JSONObject())]
                : ["jsonrpc": "2.0", "id": .int(id),
                   "error": ["code": -32601, "message": .string("apple-code does not offer \(method)")]]
            try? send(reply)
            return
        }
        let waiting = lock.withLock { pending.removeValue(forKey: id) }
        guard let waiting else { return }
        if let error = message["error"] {
            let text = error["message"]?.stringValue ?? error.jsonText
            waiting.resume(throwing: Failure(description: "MCP server '\(name)' refused: \(text)"))
        } else {
            waiting.resume(returning: message["result"] ?? .null)
        }
    }

    private func fail(_ why: String) {
        let waiting = lock.withLock { () -> [CheckedContinuation<JSONValue, Error>] in
            if failure == nil { failure = why }
            defer { pending.removeAll() }
            return Array(pending.values)
        }
        let error = Failure(description: failureText())
        for continuation in waiting { continuation.resume(throwing: error) }
    }

    private func failureText() -> String {
        let why = lock.withLock { failure ?? "failed" }
        return "MCP server '\(name)' \(why): its tools cannot be used in this run"
    }

    static func resolve(_ command: String, searchPath: String) -> String? {
        if command.contains("/") { return FileManager.default.isExecutableFile(atPath: command) ? command : nil }
        for folder in searchPath.split(separator: ":") {
            let candidate = "\(folder)/\(command)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
