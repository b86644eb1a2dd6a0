import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether anything accepts a TCP connection at an address: tells a busy server (it accepts, then takes its time
/// to answer) from one that cannot be reached at all (refused, unknown host, or no answer to the connection).
enum TCPProbe {
    static func accepts(host: String, port: Int, timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: acceptsNow(host: host, port: port, timeout: timeout))
            }
        }
    }

    /// Tries each address of `host`, each connect bounded by `timeout`.
    private static func acceptsNow(host: String, port: Int, timeout: TimeInterval) -> Bool {
        guard let fd = try? TCPConnect.open(host: host, port: port, wait: { try writable($0, timeout: timeout) })
        else { return false }
        close(fd)
        return true
    }

    private struct NoAnswer: Error {}

    private static func writable(_ fd: Int32, timeout: TimeInterval) throws {
        var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&waiting, 1, Int32(max(1, timeout * 1000))) == 1 else { throw NoAnswer() }
    }
}
