#if canImport(FoundationNetworking)
@testable import AppleCodeAgent
import AppleCodeCore
import Foundation
import Glibc
import Testing

/// A one-connection HTTP server on a loopback port, on its own thread: it reads one request (head and
/// Content-Length body), then plays `script`: bytes to send, pauses, then closes the connection (or holds it open
/// for `holdOpen` seconds). What it read, and whether the client closed first, are kept for the test.
final class OneShotServer: @unchecked Sendable {
    enum Step {
        case send(String)
        case pause(TimeInterval)
    }

    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var request = ""
    private var clientClosed = false

    init(_ script: [Step], holdOpen: TimeInterval = 0) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = listener
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(listener, raw, length) == 0, listen(listener, 4) == 0,
                      getsockname(listener, raw, &length) == 0 else {
                    throw AgentError(.backendError, "cannot listen")
                }
            }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in serve(script, holdOpen: holdOpen) }.start()
    }

    private func serve(_ script: [Step], holdOpen: TimeInterval) {
        defer { close(listener); done.signal() }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var received = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !Self.complete(received) {
            let count = recv(connection, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            received += chunk[..<count]
        }
        lock.withLock { request = String(decoding: received, as: UTF8.self) }
        for step in script {
            switch step {
            case .send(let text): _ = text.utf8CString.withUnsafeBufferPointer {
                    send(connection, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL))
                }
            case .pause(let seconds): usleep(UInt32(seconds * 1_000_000))
            }
        }
        guard holdOpen > 0 else { return }
        // Wait for the client to close (recv 0) or the hold to pass.
        var watched = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
        if poll(&watched, 1, Int32(holdOpen * 1000)) == 1, recv(connection, &chunk, chunk.count, 0) <= 0 {
            lock.withLock { clientClosed = true }
        }
    }

    /// A whole request: the head and as many body bytes as its Content-Length says.
    private static func complete(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let length = text[..<end.lowerBound].split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        return text.utf8.count - text[..<end.upperBound].utf8.count >= length
    }

    /// Waits for the script to end; what the server read and whether the client closed the connection first.
    func finished() -> (request: String, clientClosed: Bool) {
        done.wait()
        return lock.withLock { (request, clientClosed) }
    }
}

@Suite struct SocketHTTPTests {
    func url(_ server: OneShotServer, _ path: String = "/v1/chat/completions") -> URL {
        URL(string: "http://127.0.0.1:\(server.port)\(path)")!
    }

    /// A GET of `server`'s chat path, read whole.
    func get(_ server: OneShotServer) async throws -> HTTPClient.Response {
        try await HTTPClient.send(url: url(server), method: "GET", body: nil, headers: [:], timeout: 5)
    }

    func body(of streamed: HTTPClient.Streamed) async throws -> (text: String, pieces: Int) {
        var data = Data()
        var pieces = 0
        for try await piece in streamed.body {
            data.append(piece)
            pieces += 1
        }
        return (String(decoding: data, as: UTF8.self), pieces)
    }

    @Test func sendsOneRequestPerConnectionWithItsBodyAndHeaders() async throws {
        let server = try OneShotServer([.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")])
        let response = try await HTTPClient.send(url: url(server, "/v1/models?x=1"), method: "POST",
                                                 body: Data("{\"a\":1}".utf8),
                                                 headers: ["Content-Type": "application/json"], timeout: 5)
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "ok")
        let request = server.finished().request
        #expect(request == "POST /v1/models?x=1 HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{\"a\":1}")
    }

    @Test func chunkedBodiesAreDecodedAsTheyArrive() async throws {
        // What uvicorn (llama-cpp-python) and Go's server (ollama) send for a stream: chunks, one with an
        // extension, a trailer after the last.
        let server = try OneShotServer([
            .send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"),
            .send("6\r\ndata: \r\n"), .pause(0.05),
            .send("b;name=value\r\n{\"x\":\"y\"}\n\n\r\n"), .pause(0.05),
            .send("0\r\nX-Trailer: 1\r\n\r\n"),
        ])
        let streamed = try await HTTPClient.open(url: url(server), method: "POST", body: Data(), headers: [:],
                                                 timeout: 5)
        #expect(streamed.status == 200)
        #expect(streamed.contentType == "text/event-stream")
        let (text, pieces) = try await body(of: streamed)
        #expect(text == "data: {\"x\":\"y\"}\n\n")
        #expect(pieces >= 2)
    }

    @Test func aBodyWithoutLengthEndsWithTheConnection() async throws {
        // The scripted test server's stream (HTTP/1.0 style): no length, no chunks.
        let server = try OneShotServer([.send("HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\nda"),
                                        .pause(0.05), .send("ta: [DONE]\n\n")])
        let streamed = try await HTTPClient.open(url: url(server), method: "GET", body: nil, headers: [:], timeout: 5)
        #expect(try await body(of: streamed).text == "data: [DONE]\n\n")
    }

    @Test func interimResponsesAreSkipped() async throws {
        let server = try OneShotServer([.send("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n"
            + "content-length: 9\r\n\r\nno model!")])
        let response = try await get(server)
        #expect(response.status == 404)
        #expect(String(decoding: response.body, as: UTF8.self) == "no model!")
    }

    @Test func aBodyCutShortIsAnErrorNotATruncatedAnswer() async throws {
        let server = try OneShotServer([.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")])
        await #expect(throws: HTTPClient.Failure.other("the server closed the connection before the response ended")) {
            _ = try await get(server)
        }
        let chunked = try OneShotServer([.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort")])
        await #expect(throws: HTTPClient.Failure.other("the server closed the connection before the response ended")) {
            _ = try await get(chunked)
        }
    }

    @Test func aServerThatClosesWithoutAnswerOrSendsNoHTTPIsAnError() async throws {
        let silent = try OneShotServer([])
        await #expect(throws: HTTPClient.Failure.other("the server closed the connection without a response")) {
            _ = try await get(silent)
        }
        let garbage = try OneShotServer([.send("SSH-2.0-OpenSSH_9.6\r\n\r\n")])
        await #expect(throws: HTTPClient.Failure.other("the server's reply is not HTTP/1.x: SSH-2.0-OpenSSH_9.6")) {
            _ = try await get(garbage)
        }
    }

    @Test func nothingListeningIsCannotConnect() async throws {
        let refused = URL(string: "http://127.0.0.1:9/v1/models")!  // discard: nobody listens
        do {
            _ = try await HTTPClient.send(url: refused, method: "GET", body: nil, headers: [:], timeout: 5)
            Issue.record("a refused connection answered")
        } catch HTTPClient.Failure.cannotConnect(let detail) {
            #expect(detail.contains("refused"))
        }
        do {
            _ = try await HTTPClient.send(url: URL(string: "http://no-such-host.invalid/v1")!, method: "GET",
                                          body: nil, headers: [:], timeout: 5)
            Issue.record("an unknown host answered")
        } catch HTTPClient.Failure.cannotConnect(let detail) {
            #expect(detail.contains("no-such-host.invalid"))
        }
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        // The server holds the connection for 30 s: a client that waited for it instead of its own 0.3 s timeout
        // would take that long. The bound leaves a loaded machine (where this once took 9.7 s) room to spare.
        let server = try OneShotServer([], holdOpen: 30)
        let started = ContinuousClock.now
        await #expect(throws: HTTPClient.Failure.timedOut) {
            _ = try await HTTPClient.send(url: url(server), method: "GET", body: nil, headers: [:], timeout: 0.3)
        }
        #expect(ContinuousClock.now - started < .seconds(25))
        #expect(server.finished().clientClosed)
    }

    @Test func closingOrCancellingClosesTheConnection() async throws {
        // A stream that goes on: the reader stops after the first piece and closes, as OpenAIChatModel does; the
        // server must see the close (a streaming model server stops generating then).
        let chunk = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"
        let server = try OneShotServer([.send(chunk)], holdOpen: 30)
        let started = ContinuousClock.now
        let streamed = try await HTTPClient.open(url: url(server), method: "POST", body: Data(), headers: [:],
                                                 timeout: 60)
        for try await _ in streamed.body { break }
        streamed.close()
        #expect(server.finished().clientClosed)
        #expect(ContinuousClock.now - started < .seconds(25))

        // The reading task cancelled while it waits for the next piece.
        let reading = try OneShotServer([.send(chunk)], holdOpen: 30)
        let task = Task {
            let streamed = try await HTTPClient.open(url: url(reading), method: "POST", body: Data(), headers: [:],
                                                     timeout: 60)
            for try await _ in streamed.body {}
            try Task.checkCancellation()  // a cancelled stream ends without an error
        }
        try await Task.sleep(for: .milliseconds(200))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(reading.finished().clientClosed)

        // Cancelled while waiting for the head.
        let waiting = try OneShotServer([], holdOpen: 30)
        let request = Task {
            try await HTTPClient.send(url: url(waiting), method: "GET", body: nil, headers: [:], timeout: 60)
        }
        try await Task.sleep(for: .milliseconds(100))
        request.cancel()
        await #expect(throws: CancellationError.self) { _ = try await request.value }
        #expect(waiting.finished().clientClosed)
    }

    @Test func headerValuesCannotStartHeadersOfTheirOwn() throws {
        #expect(throws: HTTPClient.Failure.other("the header Authorization holds a line break")) {
            _ = try SocketRequest(url: URL(string: "http://127.0.0.1:1/v1")!, method: "GET", body: nil,
                                  headers: ["Authorization": "Bearer x\r\nX-Evil: 1"])
        }
        let ipv6 = try SocketRequest(url: URL(string: "http://[::1]:8080/v1/models")!, method: "GET", body: nil,
                                     headers: [:])
        #expect(ipv6.host == "::1" && ipv6.port == 8080)
        #expect(String(decoding: ipv6.bytes, as: UTF8.self)
            == "GET /v1/models HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n")
    }
}
#endif
