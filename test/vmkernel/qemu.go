package vmkernel

import (
	"fmt"
	"strconv"
	"strings"
)

// kernelParams come before "--" on the kernel command line. Each is one the
// kernel knows: an unknown word would reach /init as an argument before
// the test binary. microvm under TCG hangs at "Marking TSC unstable"
// without tsc_early_khz; panic=-1 with QEMU's -no-reboot turns a guest
// panic into QEMU's exit rather than a hang.
var kernelParams = []string{
	"console=ttyS0", "panic=-1", "quiet", "mitigations=off", "audit=0",
	"lsm=capability", "tsc_early_khz=2000000",
}

// maxCmdline is x86's COMMAND_LINE_SIZE less room for the terminating NUL.
const maxCmdline = 2047

// kernelCmdline is the kernel command line that has /init run binary with
// args. The kernel splits it at spaces and strips quotes, so an argument
// with either cannot travel on it.
func kernelCmdline(binary string, args []string) (string, error) {
	words := append([]string{binary}, args...)
	for _, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n\"'") {
			return "", fmt.Errorf("vmkernel: argument %q cannot travel on the kernel command line (empty, or a space or quote in it)", w)
		}
	}
	line := strings.Join(kernelParams, " ") + " -- " + strings.Join(words, " ")
	if len(line) > maxCmdline {
		return "", fmt.Errorf("vmkernel: kernel command line of %d bytes, over the kernel's %d", len(line), maxCmdline)
	}
	return line, nil
}

// vmFiles are the paths QEMU reads and writes.
type vmFiles struct {
	Kernel, Initrd   string
	Console, Results string // the first and second serial port, as files
}

// qemuArgs boots a microvm under TCG: one CPU, no devices but two serial
// ports (no network device at all), no monitor, and QEMU exits when the
// guest powers off or reboots. The second port needs microvm's explicit
// isa-serial device.
func qemuArgs(f vmFiles, memoryMB int, cmdline string) []string {
	return []string{
		"-accel", "tcg",
		"-M", "microvm,pit=on,rtc=on",
		"-m", strconv.Itoa(memoryMB),
		"-smp", "1",
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-monitor", "none",
		"-kernel", f.Kernel,
		"-initrd", f.Initrd,
		"-serial", "file:" + f.Console,
		"-chardev", "file,id=results,path=" + f.Results,
		"-device", "isa-serial,chardev=results,iobase=0x2f8,irq=3",
		"-append", cmdline,
	}
}
