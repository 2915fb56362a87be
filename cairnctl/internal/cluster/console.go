package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"
)

// The console shows the maintenance certificate's fingerprint twice: in the banner (" fingerprint: HEX")
// and in machined's log line (fingerprint=HEX). Either will do; the last one printed is the current
// boot's, since the certificate is made anew at every boot.
var fingerprintRE = regexp.MustCompile(`fingerprint[:=] *([0-9a-f]{64})\b`)

// Fingerprint returns the last fingerprint in a console log, "" if there is none yet.
func Fingerprint(console []byte) string {
	m := fingerprintRE.FindAllSubmatch(console, -1)
	if len(m) == 0 {
		return ""
	}
	return string(m[len(m)-1][1])
}

// ConsoleFingerprint reads the fingerprint from a console log file, looking only past offset (the file's
// size before a reboot, so an older boot's fingerprint is not taken for the new one).
func ConsoleFingerprint(path string, offset int64) (string, error) {
	data, err := readFrom(path, offset)
	if err != nil {
		return "", err
	}
	return Fingerprint(data), nil
}

// readFrom reads a console log from offset to its end.
func readFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("console %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", path, err)
	}
	return data, nil
}

// WaitFingerprint polls the console log until it shows a fingerprint past offset.
func WaitFingerprint(ctx context.Context, path string, offset int64) (string, error) {
	for {
		fp, err := ConsoleFingerprint(path, offset)
		if err == nil && fp != "" {
			return fp, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no certificate fingerprint on the console %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ConsoleTail is the end of a console log, for error messages.
func ConsoleTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(console %s: %v)", path, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
