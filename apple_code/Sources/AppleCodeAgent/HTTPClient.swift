import AppleCodeCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP exchange over URLSession that stops promptly when its task is cancelled (the async URLSession API
/// does not reliably do so on Linux), bounded by a timeout that this type enforces itself: on Linux a server that
/// accepts the connection and never answers outlasts URLRequest's `timeoutInterval`.
enum HTTPClient {
    struct Response: Sendable {
        let status: Int
        let body: Data
    }

    enum Failure: Error, Sendable {
        /// Nothing listens at the address (or the host is unknown).
        case cannotConnect(String)
        case timedOut
        case other(String)
    }

    static func send(url: URL, method: String, body: Data?, headers: [String: String],
                     timeout: TimeInterval) async throws -> Response {
        try await withThrowingTaskGroup(of: Response.self) { group in
            group.addTask { try await exchange(url: url, method: method, body: body, headers: headers, timeout: timeout) }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                throw Failure.timedOut
            }
            // The first to end wins; cancelling the other stops the request or the timer.
            defer { group.cancelAll() }
            guard let response = try await group.next() else { throw Failure.timedOut }
            return response
        }
    }

    private static func exchange(url: URL, method: String, body: Data?, headers: [String: String],
                                 timeout: TimeInterval) async throws -> Response {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let handle = TaskHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Response, Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: classify(error))
                    } else {
                        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                        continuation.resume(returning: Response(status: status, body: data ?? Data()))
                    }
                }
                handle.set(task)
                task.resume()
            }
        } onCancel: {
            handle.cancel()
        }
    }

    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.connectionProxyDictionary = [:]
        return URLSession(configuration: configuration)
    }()

    private static func classify(_ error: Error) -> Error {
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

/// Holds the data task so cancellation can reach it, also when cancellation comes before the task exists.
private final class TaskHandle: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    func set(_ task: URLSessionDataTask) {
        lock.lock()
        self.task = task
        let cancelNow = cancelled
        lock.unlock()
        if cancelNow { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}
