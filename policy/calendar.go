package policy

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/bucket"
)

// calendarField parses a policy's calendar or timezone field (key is
// "calendar" or "timezone") into pol's limit. Whether the calendar fits the
// algorithm, and that no period is given with it, bucket.Limit.Validate
// checks afterwards.
func calendarField(pol *Policy, key string, v *yaml.Node, fpath string) error {
	s, ok, err := stringField(v, fpath)
	if err != nil || !ok {
		return err
	}
	if key == "calendar" {
		c, err := bucket.ParseCalendar(s)
		if err != nil || c == bucket.NoCalendar {
			return &FileError{Line: lineOf(v), Path: fpath, Err: bucket.ErrUnknownCalendar,
				Reason: fmt.Sprintf("unknown calendar %s (want day, week, month or year)", Echo(s))}
		}
		pol.Limit.Calendar = c
		return nil
	}
	loc, err := bucket.LoadZone(s)
	if err != nil {
		return &FileError{Line: lineOf(v), Path: fpath, Err: bucket.ErrUnknownZone,
			Reason: fmt.Sprintf("unknown time zone %s (want an IANA name such as Europe/Berlin, or UTC)", Echo(s))}
	}
	pol.Limit.Zone = loc
	return nil
}
