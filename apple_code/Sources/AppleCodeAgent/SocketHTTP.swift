#if canImport(FoundationNetworking)
import Foundation
import Glibc

/// HTTP/1.1 over a plain TCP socket, for `http://` URLs where URLSession is swift-corelibs-foundation's (Linux).
/// That URLSession keeps a core busy while it waits for a response (6.6 s of CPU in an 8 s wait, measured on this
/// toolchain with a server that takes 8 s to answer), and on a two-core machine the local model server it waits
/// for then runs at half speed or worse. Here the waiting is `poll`, which costs nothing.
///
/// One request per connection (`Connection: close`); the response body is framed by `Content-Length`, the chunked
/// transfer coding, or the end of the connection, and reaches the reader in the pieces the network delivers.
/// `timeout` bounds the whole exchange; `close()` or cancelling the task that reads closes the connection at once,
/// which stops a streaming server's generation.
enum SocketHTTP {
    static func open(url: URL, method: String, body: Data?, headers: [String: String],
                     timeout: TimeInterval) async throws -> HTTPClient.Streamed {
        let request = try SocketRequest(url: url, method: method, body: body, headers: headers)
        let exchange = try SocketExchange(timeout: timeout)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPClient.Streamed, Error>) in
                exchange.start(request, head: continuation)
            }
        } onCancel: {
            exchange.cancel()
        }
    }
}

/// Where to connect and the bytes to send.
struct SocketRequest: Sendable {
    let host: String
    let port: Int
    let bytes: [UInt8]
    let expectsBody: Bool

    init(url: URL, method: String, body: Data?, headers: [String: String]) throws {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
              var host = components.host, !host.isEmpty else {
            throw HTTPClient.Failure.other("\(url.absoluteString) has no host")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        port = components.port ?? 80
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (components.port.map { ":\($0)" } ?? "")
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            // A header may not carry a line break (it would start a header of its own).
            guard !name.contains(where: \.isNewline), !value.contains(where: \.isNewline) else {
                throw HTTPClient.Failure.other("the header \(name) holds a line break")
            }
            head += "\(name): \(value)\r\n"
        }
        if body != nil || method == "POST" || method == "PUT" { head += "Content-Length: \(body?.count ?? 0)\r\n" }
        head += "Connection: close\r\n\r\n"
        bytes = Array(head.utf8) + Array(body ?? Data())
        expectsBody = method != "HEAD"
    }
}

/// The status line and headers of a response.
struct ResponseHead: Sendable, Equatable {
    let status: Int
    /// Names in lower case.
    let headers: [String: String]

    static let maxBytes = 64 * 1024

    /// Parses the bytes before the blank line that ends the head.
    static func parse(_ bytes: ArraySlice<UInt8>) throws -> ResponseHead {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { throw HTTPClient.Failure.other("the server sent an empty response head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...999).contains(status)
        else {
            throw HTTPClient.Failure.other("the server's reply is not HTTP/1.x: \(statusLine.prefix(80))")
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            // Repeated headers are one list (RFC 9110 5.3).
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return ResponseHead(status: status, headers: headers)
    }

    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
        case untilClose
    }

    func framing(expectsBody: Bool) throws -> Framing {
        if !expectsBody || (100..<200).contains(status) || status == 204 || status == 304 { return .none }
        if let coding = headers["transfer-encoding"] {
            let last = coding.split(separator: ",").last?.trimmingCharacters(in: .whitespaces).lowercased()
            return last == "chunked" ? .chunked : .untilClose
        }
        if let length = headers["content-length"] {
            guard let count = Int(length.trimmingCharacters(in: .whitespaces)), count >= 0 else {
                throw HTTPClient.Failure.other("the server sent an invalid Content-Length: \(length.prefix(40))")
            }
            return .length(count)
        }
        return .untilClose
    }
}

/// One exchange on its own thread: connect, send, read the head (handed to the waiting caller), then the body
/// into the stream. A pipe wakes the thread's `poll` when the exchange is cancelled.
private final class SocketExchange: @unchecked Sendable {
    private let lock = NSLock()
    private let deadline: ContinuousClock.Instant
    private let stream: AsyncThrowingStream<Data, Error>
    private let pieces: AsyncThrowingStream<Data, Error>.Continuation
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var cancelled = false
    private var closed = false

    init(timeout: TimeInterval) throws {
        deadline = .now + .milliseconds(Int64(max(0, min(timeout, 1e9)) * 1000))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw HTTPClient.Failure.other("cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        (wakeRead, wakeWrite) = (ends[0], ends[1])
        (stream, pieces) = AsyncThrowingStream.makeStream(of: Data.self)
        // The reader stopped (done early, or its task was cancelled): close the connection.
        pieces.onTermination = { [weak self] _ in self?.cancel() }
    }

    func start(_ request: SocketRequest, head: CheckedContinuation<HTTPClient.Streamed, Error>) {
        let thread = Thread { [self] in run(request, head: head) }
        thread.name = "apple-code http"
        thread.start()
    }

    func cancel() {
        lock.withLock {
            guard !cancelled, !closed else { return }
            cancelled = true
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    private var isCancelled: Bool { lock.withLock { cancelled } }

    private func run(_ request: SocketRequest, head: CheckedContinuation<HTTPClient.Streamed, Error>) {
        var waiting: CheckedContinuation<HTTPClient.Streamed, Error>? = head
        var socket: Int32 = -1
        do {
            socket = try connect(request)
            try send(request.bytes, on: socket)
            var reader = SocketReader(socket: socket, wait: { [self] in try wait($0, events: Int16(POLLIN)) })
            var response = try reader.head()
            while (100..<200).contains(response.status), response.status != 101 { response = try reader.head() }
            let framing = try response.framing(expectsBody: request.expectsBody)
            let streamed = HTTPClient.Streamed(status: response.status,
                                               contentType: response.headers["content-type"] ?? "",
                                               body: stream, close: { [weak self] in self?.cancel() })
            waiting?.resume(returning: streamed)
            waiting = nil
            try reader.body(framing) { pieces.yield(Data($0)) }
            pieces.finish()
        } catch {
            let error = isCancelled ? CancellationError() : error
            waiting?.resume(throwing: error)
            pieces.finish(throwing: error)
        }
        lock.withLock {
            closed = true
            if socket >= 0 { close(socket) }
            close(wakeRead)
            close(wakeWrite)
        }
    }

    /// Waits until `socket` is ready for `events`; throws when the exchange is cancelled or out of time.
    private func wait(_ socket: Int32, events: Int16) throws {
        while true {
            if isCancelled { throw CancellationError() }
            let left = deadline - .now
            guard left > .zero else { throw HTTPClient.Failure.timedOut }
            let milliseconds = Int32(clamping: left.components.seconds * 1000
                + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var watched = [pollfd(fd: socket, events: events, revents: 0),
                           pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&watched, 2, milliseconds)
            if ready < 0, errno != EINTR {
                throw HTTPClient.Failure.other("poll failed: \(String(cString: strerror(errno)))")
            }
            if isCancelled { throw CancellationError() }
            // Readiness includes errors and hang-ups: the read or write that follows reports them.
            if ready > 0, watched[0].revents != 0 { return }
        }
    }

    /// The connection, or `cannotConnect` naming the host and why.
    private func connect(_ request: SocketRequest) throws -> Int32 {
        let socket: Int32
        do {
            socket = try TCPConnect.open(host: request.host, port: request.port) { [self] in
                try wait($0, events: Int16(POLLOUT))
            }
        } catch TCPConnect.Failure.unknownHost(let reason) {
            throw HTTPClient.Failure.cannotConnect("cannot find host \(request.host): \(reason)")
        } catch TCPConnect.Failure.refused(let reason) {
            throw HTTPClient.Failure.cannotConnect("\(request.host) port \(request.port): \(reason)")
        }
        var on: Int32 = 1
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        return socket
    }

    private func send(_ bytes: [UInt8], on socket: Int32) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.send(socket, base + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                sent += count
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try wait(socket, events: Int16(POLLOUT))
            } else {
                throw HTTPClient.Failure.other("sending the request failed: \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// Reads a response from a non-blocking socket: the head, then the body as its framing says.
struct SocketReader {
    let socket: Int32
    /// Returns when the socket has something to read (or an error or hang-up to report).
    let wait: (Int32) throws -> Void
    private var buffer: [UInt8] = []
    private var start = 0
    private var ended = false

    init(socket: Int32, wait: @escaping (Int32) throws -> Void) {
        self.socket = socket
        self.wait = wait
    }

    static let closedEarly = HTTPClient.Failure.other("the server closed the connection before the response ended")

    private var available: Int { buffer.count - start }

    /// Reads more into the buffer; false at the end of the connection.
    private mutating func fill() throws -> Bool {
        if ended { return false }
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return true
            }
            if count == 0 {
                ended = true
                return false
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR: try wait(socket)
            default: throw HTTPClient.Failure.other("reading the response failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    private mutating func take(_ count: Int) -> ArraySlice<UInt8> {
        defer { start += count }
        return buffer[start..<start + count]
    }

    /// The bytes up to the next CRLF (not included), at most `limit` of them.
    private mutating func line(limit: Int) throws -> ArraySlice<UInt8> {
        while true {
            if let end = buffer[start...].firstIndex(of: 0x0A) {
                let line = take(end - start + 1).dropLast()
                return line.last == 0x0D ? line.dropLast() : line
            }
            guard available <= limit else { throw HTTPClient.Failure.other("the server sent a line over \(limit) bytes") }
            guard try fill() else { throw Self.closedEarly }
        }
    }

    /// The next response head.
    mutating func head() throws -> ResponseHead {
        while true {
            if let end = Self.blankLine(in: buffer, from: start) {
                let head = try ResponseHead.parse(buffer[start..<end])
                start = end + 4
                return head
            }
            guard available <= ResponseHead.maxBytes else {
                throw HTTPClient.Failure.other("the server's response head is over \(ResponseHead.maxBytes) bytes")
            }
            guard try fill() else {
                throw available == 0
                    ? HTTPClient.Failure.other("the server closed the connection without a response")
                    : Self.closedEarly
            }
        }
    }

    /// Where the CRLF CRLF that ends a head starts.
    private static func blankLine(in bytes: [UInt8], from: Int) -> Int? {
        var index = from
        while index + 4 <= bytes.count {
            if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D, bytes[index + 3] == 0x0A {
                return index
            }
            index += 1
        }
        return nil
    }

    /// Hands the body to `deliver` in pieces, as `framing` says it ends.
    mutating func body(_ framing: ResponseHead.Framing, deliver: (ArraySlice<UInt8>) -> Void) throws {
        switch framing {
        case .none:
            return
        case .length(let count):
            try copy(count, deliver)
        case .untilClose:
            while true {
                if available > 0 { deliver(take(available)) }
                guard try fill() else { return }
            }
        case .chunked:
            while true {
                let sizeLine = String(decoding: try line(limit: 4096), as: UTF8.self)
                let digits = sizeLine.split(separator: ";", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces)
                guard let digits, let size = Int(digits, radix: 16), size >= 0 else {
                    throw HTTPClient.Failure.other("the server sent an invalid chunk size: \(sizeLine.prefix(40))")
                }
                if size == 0 {
                    // Trailer fields, then a blank line; a server that closes instead has still sent it all.
                    while let trailer = try? line(limit: ResponseHead.maxBytes), !trailer.isEmpty {}
                    return
                }
                try copy(size, deliver)
                guard try line(limit: 2).isEmpty else {
                    throw HTTPClient.Failure.other("the server's chunk did not end where its size said")
                }
            }
        }
    }

    private mutating func copy(_ count: Int, _ deliver: (ArraySlice<UInt8>) -> Void) throws {
        var left = count
        while left > 0 {
            if available == 0 { guard try fill() else { throw Self.closedEarly } }
            let piece = min(left, available)
            deliver(take(piece))
            left -= piece
        }
    }
}
#endif
