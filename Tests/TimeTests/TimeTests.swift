import Foundation
import Testing
import Time

@Suite struct RFC3339Tests {
    @Test func formatsEachFraction() {
        let micros: Int64 = 1_709_251_198_123_456
        #expect(RFC3339.format(unixMicroseconds: micros) == "2024-02-29T23:59:58Z")
        #expect(RFC3339.format(unixMicroseconds: micros, fraction: .milliseconds) == "2024-02-29T23:59:58.123Z")
        #expect(RFC3339.format(unixMicroseconds: micros, fraction: .microseconds) == "2024-02-29T23:59:58.123456Z")
        #expect(RFC3339.format(unixMilliseconds: 0, fraction: .millisecondsWhenNonZero) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.format(unixMilliseconds: -500) == "1969-12-31T23:59:59.500Z")
        #expect(RFC3339.format(unixSeconds: .max) == "9999-12-31T23:59:59Z")
        #expect(RFC3339.format(unixSeconds: .min) == "0001-01-01T00:00:00Z")
    }

    @Test func parsesOffsetsAndFractions() {
        #expect(RFC3339.parse("2026-01-01T01:00:00+01:00") == 1_767_225_600_000_000)
        #expect(RFC3339.parse("1969-12-31t23:59:59.5z") == -500_000)
        #expect(RFC3339.parse("2024-02-29T23:59:58.1234567Z") == 1_709_251_198_123_456)
        for bad in ["2023-02-29T00:00:00Z", "2024-01-01T00:00:60Z", "2024-01-01 00:00:00Z", "0000-01-01T00:00:00Z",
                    "2024-01-01T00:00:00", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00+0100"] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func roundTripsThroughDate() throws {
        let date = try #require(RFC3339.date(from: "2024-05-01T12:00:00.250Z"))
        #expect(RFC3339.string(from: date) == "2024-05-01T12:00:00.250Z")
        #expect(UnixTime.milliseconds(date) == 1_714_564_800_250)
    }
}

@Suite struct CivilCalendarTests {
    @Test func daysRoundTrip() {
        for days: Int64 in [-719_468, -1, 0, 1, 11_016, 19_782, 2_932_896] {
            let (year, month, day) = CivilCalendar.date(fromDays: days)
            #expect(CivilCalendar.days(year: year, month: month, day: day) == days)
        }
        #expect(CivilCalendar.days(year: 2000, month: 3, day: 1) == 11_017)
        #expect(CivilCalendar.isValid(year: 2000, month: 2, day: 29))
        #expect(!CivilCalendar.isValid(year: 1900, month: 2, day: 29))
    }
}

@Suite struct ClockTests {
    @Test func fixedClockAnswersItsDate() {
        let clock = Clock.fixed(Date(timeIntervalSince1970: 1_700_000_000.9))
        #expect(clock.unixSeconds() == 1_700_000_000)
        #expect(clock.unixMilliseconds() == 1_700_000_000_900)
    }
}
