import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to the first address of a host that accepts one: a non-blocking, close-on-exec socket.
/// `wait` returns once a connecting socket is writable (the connect has finished, one way or the other) or throws
/// (time up, cancelled); its error ends the attempt. Shared by TCPProbe (does anything listen?) and, on Linux,
/// SocketHTTP (the connection its request goes over).
enum TCPConnect {
    enum Failure: Error, Equatable {
        /// The host name does not resolve.
        case unknownHost(String)
        /// No address of the host accepted: the last one's reason.
        case refused(String)
    }

    static func open(host: String, port: Int, wait: (Int32) throws -> Void) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if os(Linux)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else { throw Failure.unknownHost(String(cString: gai_strerror(status))) }
        defer { freeaddrinfo(list) }
        var reason = "no address"
        var entry = list
        while let info = entry?.pointee {
            entry = info.ai_next
            // Close-on-exec from the start where the flag exists: a command spawned meanwhile must not inherit
            // the connection (it would keep it open after a cancel closes ours).
            #if os(Linux)
            let fd = socket(info.ai_family, info.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.ai_protocol)
            #else
            let fd = socket(info.ai_family, info.ai_socktype, info.ai_protocol)
            #endif
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            var error: Int32 = 0
            if connect(fd, info.ai_addr, info.ai_addrlen) != 0 {
                error = errno
                if error == EINPROGRESS {
                    do { try wait(fd) } catch { close(fd); throw error }
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 { error = errno }
                }
            }
            if error == 0 { return fd }
            reason = String(cString: strerror(error))
            close(fd)
        }
        throw Failure.refused(reason)
    }
}
