import Testing
@testable import AppleCodeTools
