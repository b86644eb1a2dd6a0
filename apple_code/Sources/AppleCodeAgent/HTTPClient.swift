import AppleCodeCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP exchange over URLSession whose body arrives as it is sent (a streamed chat completion shows its text
/// as it is generated). Cancelling the task that reads it, or its `timeout` (enforced here: on Linux a server that
/// accepts the connection and never answers outlasts URLRequest's `timeoutInterval`), cancels the data task, which
/// closes the connection: a server that streams stops generating for it.
enum HTTPClient {
    struct Response: Sendable {
        let status: Int
        let body: Data
    }

    /// The status and headers, then the body in the pieces the network delivers. `close()` ends the exchange
    /// early (closing the connection); reading to the end or cancelling the reading task needs no `close()`.
    struct Streamed: Sendable {
        let status: Int
        let contentType: String
        let body: AsyncThrowingStream<Data, Error>
        let close: @Sendable () -> Void
    }

    enum Failure: Error, Sendable, Equatable {
        /// Nothing listens at the address (or the host is unknown).
        case cannotConnect(String)
        case timedOut
        case other(String)
    }

    /// The whole response.
    static func send(url: URL, method: String, body: Data?, headers: [String: String],
                     timeout: TimeInterval) async throws -> Response {
        let streamed = try await open(url: url, method: method, body: body, headers: headers, timeout: timeout)
        var data = Data()
        for try await piece in streamed.body { data.append(piece) }
        try Task.checkCancellation()
        return Response(status: streamed.status, body: data)
    }

    /// Sends the request and returns once the status and headers are in; `timeout` bounds the whole exchange,
    /// body included. `close()`, or cancelling the task that reads `body`, closes the connection.
    static func open(url: URL, method: String, body: Data?, headers: [String: String],
                     timeout: TimeInterval) async throws -> Streamed {
        #if canImport(FoundationNetworking)
        // This URLSession (swift-corelibs-foundation) keeps a core busy while it waits: see SocketHTTP.
        if url.scheme?.lowercased() == "http" {
            return try await SocketHTTP.open(url: url, method: method, body: body, headers: headers, timeout: timeout)
        }
        #endif
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let exchange = Exchange(timeout: timeout)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Streamed, Error>) in
                exchange.start(request, head: continuation)
            }
        } onCancel: {
            exchange.cancel()
        }
    }

    static func classify(_ error: Error) -> Error {
        guard let urlError = error as? URLError else { return Failure.other("\(error)") }
        switch urlError.code {
        case .cancelled: return CancellationError()
        case .timedOut: return Failure.timedOut
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet:
            return Failure.cannotConnect(urlError.localizedDescription)
        default: return Failure.other(urlError.localizedDescription)
        }
    }
}

/// One data task and what waits on it: the head (status, headers) once, then the body pieces. Its own session,
/// so the delegate sees only this task; the session is invalidated when the task ends.
private final class Exchange: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let timeout: TimeInterval
    private let stream: AsyncThrowingStream<Data, Error>
    private let pieces: AsyncThrowingStream<Data, Error>.Continuation
    private var head: CheckedContinuation<HTTPClient.Streamed, Error>?
    private var task: URLSessionDataTask?
    private var timer: DispatchWorkItem?
    private var finished = false
    private var cancelled = false

    init(timeout: TimeInterval) {
        self.timeout = timeout
        (stream, pieces) = AsyncThrowingStream.makeStream(of: Data.self)
        super.init()
        // The reader stopped (done early, or its task was cancelled): close the connection.
        pieces.onTermination = { [weak self] _ in self?.cancel() }
    }

    func start(_ request: URLRequest, head: CheckedContinuation<HTTPClient.Streamed, Error>) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.connectionProxyDictionary = [:]
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        let task = session.dataTask(with: request)
        let timer = DispatchWorkItem { [weak self] in self?.fail(HTTPClient.Failure.timedOut) }
        let cancelNow = lock.withLock {
            self.head = head
            self.task = task
            self.timer = timer
            return cancelled
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
        task.resume()
        session.finishTasksAndInvalidate()
        if cancelNow { cancel() }
    }

    func cancel() {
        let task = lock.withLock {
            cancelled = true
            return self.task
        }
        task?.cancel()
    }

    /// Ends the exchange with `error` (a timeout: the task is cancelled too), unless it already ended.
    private func fail(_ error: Error) {
        typealias Waiting = (CheckedContinuation<HTTPClient.Streamed, Error>?, URLSessionDataTask?)
        let (head, task) = lock.withLock { () -> Waiting in
            guard !finished else { return (nil, nil) }
            finished = true
            timer?.cancel()
            defer { self.head = nil }
            return (self.head, self.task)
        }
        head?.resume(throwing: error)
        pieces.finish(throwing: error)
        task?.cancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let http = response as? HTTPURLResponse
        let streamed = HTTPClient.Streamed(status: http?.statusCode ?? 0,
                                           contentType: http?.value(forHTTPHeaderField: "Content-Type") ?? "",
                                           body: stream, close: { [weak self] in self?.cancel() })
        let head = lock.withLock {
            defer { self.head = nil }
            return self.head
        }
        head?.resume(returning: streamed)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        pieces.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error {
            fail(HTTPClient.classify(error))
            return
        }
        let head = lock.withLock { () -> CheckedContinuation<HTTPClient.Streamed, Error>? in
            guard !finished else { return nil }
            finished = true
            timer?.cancel()
            defer { self.head = nil }
            return self.head
        }
        // Completed without a response head (should not happen): an error, not a hang.
        head?.resume(throwing: HTTPClient.Failure.other("the server closed the connection without a response"))
        pieces.finish()
    }
}
