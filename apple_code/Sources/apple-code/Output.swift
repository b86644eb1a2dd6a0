import AppleCodeCore
import Foundation

/// stdout and stderr, written with `write(2)` so every line is out the moment it is made (no stdio buffer to
/// flush when piped), from any thread. After the final result nothing more reaches stdout.
final class Output: @unchecked Sendable {
    let format: OutputFormat
    let verbose: Bool
    private let lock = NSLock()
    private var closed = false
    /// Every text delta of the run itself (not of plan workers): the partial answer if the run must be cut off.
    private var text = ""

    init(format: OutputFormat, verbose: Bool) {
        self.format = format
        self.verbose = verbose
    }

    var partialText: String {
        lock.lock()
        defer { lock.unlock() }
        return text
    }

    func stdout(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        Self.write(1, line + "\n")
    }

    func stderr(_ line: String) {
        Self.write(2, line + "\n")
    }

    func log(_ message: String) {
        if verbose { stderr("apple-code: \(message)") }
    }

    func event(_ event: AgentEvent) {
        if case .text(let delta) = event.kind, event.subtask == nil {
            lock.lock()
            text += delta
            lock.unlock()
        }
        guard format == .streamJSON else { return }
        for line in JSONLines.lines(for: event) { stdout(line) }
    }

    /// Writes the run's final output in the chosen format; only the first call has any effect.
    /// Returns false when something was already finished.
    @discardableResult
    func finish(_ report: RunReport, partial: String) -> Bool {
        lock.lock()
        if closed {
            lock.unlock()
            return false
        }
        switch format {
        case .streamJSON:
            Self.write(1, JSONLines.fit(AgentEvent(.result(report)).json) + "\n")
        case .json:
            Self.write(1, report.json.jsonText + "\n")
        case .text:
            let shown = report.outcome.isError ? partial : report.result
            if !shown.isEmpty { Self.write(1, shown.hasSuffix("\n") ? shown : shown + "\n") }
        }
        closed = true
        lock.unlock()
        if report.outcome.isError {
            stderr("apple-code: \(report.outcome.subtype): \(Self.errorMessage(report, partial: partial))")
        }
        return true
    }

    /// The message part of an error result (the result holds the partial answer first, when there is one).
    private static func errorMessage(_ report: RunReport, partial: String) -> String {
        guard !partial.isEmpty, report.result.hasPrefix(partial) else { return report.result }
        return String(report.result.dropFirst(partial.count)).trimmingCharacters(in: CharacterSet(charactersIn: "\n()"))
    }

    private static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let start = offset
            let written = bytes.withUnsafeBytes { buffer in
                Foundation.write(fd, buffer.baseAddress.map { $0 + start }, bytes.count - start)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return  // stdout closed (EPIPE; SIGPIPE is ignored): nothing to do
            }
            offset += written
        }
    }
}

/// Events of the run go to the output.
struct OutputSink: EventSink {
    let output: Output
    func emit(_ event: AgentEvent) { output.event(event) }
}
