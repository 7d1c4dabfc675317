package vmkernel

import (
	"strings"
	"testing"
)

// Every kernel parameter before "--" is one the kernel consumes; a bare
// unknown word (e.g. nokaslr on this kernel) would become /init's first
// argument instead of the test binary.
func TestTheKernelCommandLineHandsInitTheBinaryAndItsArguments(t *testing.T) {
	cases := []struct {
		name    string
		binary  string
		args    []string
		wantErr string
		want    string // what follows " -- "
	}{
		{name: "binary and flags", binary: "/vmtest/driver.test", args: []string{"-test.v", "-test.run=Branch|VLAN"},
			want: "/vmtest/driver.test -test.v -test.run=Branch|VLAN"},
		{name: "binary alone", binary: "/vmtest/guest.test", want: "/vmtest/guest.test"},
		{name: "a space splits an argument", binary: "/b.test", args: []string{"-test.run=A B"}, wantErr: "cannot travel"},
		{name: "quotes are stripped by the kernel", binary: "/b.test", args: []string{`-test.run="A"`}, wantErr: "cannot travel"},
		{name: "an empty argument vanishes", binary: "/b.test", args: []string{""}, wantErr: "cannot travel"},
		{name: "over COMMAND_LINE_SIZE", binary: "/b.test", args: []string{"-x=" + strings.Repeat("a", 2100)}, wantErr: "over the kernel's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := kernelCmdline(c.binary, c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			before, after, ok := strings.Cut(got, " -- ")
			if !ok || after != c.want {
				t.Fatalf("command line %q: after -- %q, want %q", got, after, c.want)
			}
			for _, p := range strings.Fields(before) {
				if !strings.Contains(p, "=") && p != "quiet" {
					t.Errorf("kernel parameter %q has no value: the kernel would pass it to /init", p)
				}
			}
			for _, need := range []string{"console=ttyS0", "tsc_early_khz=", "panic=-1"} {
				if !strings.Contains(before, need) {
					t.Errorf("command line %q lacks %s", got, need)
				}
			}
		})
	}
}

// The VM has no network device and cannot reach the host's network; it
// exits instead of rebooting, and writes only the two log files.
func TestQEMURunsAMicroVMWithNoNetworkAndTwoSerialPorts(t *testing.T) {
	args := strings.Join(qemuArgs(vmFiles{Kernel: "/k", Initrd: "/i", Console: "/d/c.log", Results: "/d/r.log"}, 256, "CMD"), " ")
	for _, want := range []string{
		"-accel tcg", "-M microvm,", "-m 256", "-nodefaults", "-no-reboot",
		"-kernel /k", "-initrd /i", "-serial file:/d/c.log",
		"-chardev file,id=results,path=/d/r.log", "-device isa-serial,chardev=results,iobase=0x2f8,irq=3",
		"-append CMD",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu args %q lack %q", args, want)
		}
	}
	for _, never := range []string{"-netdev", "-nic", "-net ", "-enable-kvm", "-virtfs"} {
		if strings.Contains(args, never) {
			t.Errorf("qemu args %q contain %q", args, never)
		}
	}
}
