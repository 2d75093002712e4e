/**
 * Calendar-month billing periods in UTC: the TypeScript twin of contracts/MonthlyPeriods.sol (a
 * differential test runs both on random anchors and times). Period k starts at the anchor's day of
 * month, k months after the anchor, at the anchor's time of day; a day the month lacks is clamped to
 * its last day (Jan 31 -> Feb 28/29 -> Mar 31). Times are unix seconds (safe integers).
 */

const DAY = 86_400;

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
export const daysFromCivil = (year: number, month: number, day: number): number => {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
};

/** The date of a day count since 1970-01-01 (H. Hinnant's civil_from_days). */
export const civilFromDays = (days: number): { year: number; month: number; day: number } => {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day };
};

export const daysInMonth = (year: number, month: number): number => {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
};

/** Start (unix seconds) of period `index` of a mandate anchored at `anchor`. */
export const periodStart = (anchor: number, index: number): number => {
  const { year, month, day } = civilFromDays(Math.floor(anchor / DAY));
  const months = year * 12 + (month - 1) + index;
  const py = Math.floor(months / 12);
  const pm = (months % 12) + 1;
  return daysFromCivil(py, pm, Math.min(day, daysInMonth(py, pm))) * DAY + (anchor % DAY);
};

/** Index of the period containing `time`, or undefined before the anchor. */
export const periodIndexAt = (anchor: number, time: number): number | undefined => {
  if (time < anchor) return undefined;
  const a = civilFromDays(Math.floor(anchor / DAY));
  const t = civilFromDays(Math.floor(time / DAY));
  const index = t.year * 12 + t.month - (a.year * 12 + a.month);
  return periodStart(anchor, index) > time ? index - 1 : index;
};
