// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice Calendar-month billing periods in UTC, the way card subscriptions bill on the same day each month.
/// Period k starts at the anchor's day of month, k months after the anchor, at the anchor's time of day;
/// a day the month does not have is clamped to its last day (Jan 31 -> Feb 28/29 -> Mar 31).
/// The service's TypeScript twin (src/ledger/period.ts) is checked against this library by a differential test.
library MonthlyPeriods {
    uint256 internal constant DAY = 86_400;

    /// @dev Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    function daysFromCivil(uint256 y, uint256 m, uint256 d) internal pure returns (uint256) {
        unchecked {
            if (m <= 2) y -= 1;
            uint256 era = y / 400;
            uint256 yoe = y - era * 400;
            uint256 doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
            uint256 doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            return era * 146_097 + doe - 719_468;
        }
    }

    /// @dev The date of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
    function civilFromDays(uint256 z) internal pure returns (uint256 y, uint256 m, uint256 d) {
        unchecked {
            z += 719_468;
            uint256 era = z / 146_097;
            uint256 doe = z - era * 146_097;
            uint256 yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
            uint256 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            uint256 mp = (5 * doy + 2) / 153;
            d = doy - (153 * mp + 2) / 5 + 1;
            m = mp < 10 ? mp + 3 : mp - 9;
            y = yoe + era * 400 + (m <= 2 ? 1 : 0);
        }
    }

    function daysInMonth(uint256 y, uint256 m) internal pure returns (uint256) {
        if (m == 2) return (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28;
        return (m == 4 || m == 6 || m == 9 || m == 11) ? 30 : 31;
    }

    /// @notice Start (unix seconds) of period `index` of a mandate anchored at `anchor`.
    function periodStart(uint256 anchor, uint256 index) internal pure returns (uint256) {
        (uint256 y, uint256 m, uint256 d) = civilFromDays(anchor / DAY);
        uint256 months = y * 12 + (m - 1) + index;
        uint256 py = months / 12;
        uint256 pm = (months % 12) + 1;
        uint256 last = daysInMonth(py, pm);
        return daysFromCivil(py, pm, d < last ? d : last) * DAY + (anchor % DAY);
    }

    /// @notice Index of the period containing `t`; `t` must not be before `anchor`.
    function periodIndexAt(uint256 anchor, uint256 t) internal pure returns (uint256 index) {
        (uint256 ay, uint256 am,) = civilFromDays(anchor / DAY);
        (uint256 ty, uint256 tm,) = civilFromDays(t / DAY);
        index = (ty * 12 + tm) - (ay * 12 + am);
        // In t's month the period may not have started yet (its day or time of day is still ahead).
        if (periodStart(anchor, index) > t) index -= 1;
    }
}
