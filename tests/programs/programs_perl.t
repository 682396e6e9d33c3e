#!/bin/sh
# programs_perl.t — perl (built with the system malloc) under
# LD_PRELOAD=libslabkit.so: a workload of hashes, arrays, string building,
# regular expressions, sort, sprintf, pack and ithreads; its output must be
# byte-for-byte what perl prints without slabkit, and slabkit's exit-time
# slabinfo shows it served the process.
set -u
. "$(dirname "$0")/../lib/programs.sh"

command -v perl >/dev/null 2>&1 || { echo "1..0 # SKIP perl is not installed"; exit 0; }
in_workdir perl
echo "1..4"

cat >work.pl <<'EOF'
use strict;
use warnings;
use Config;

my %h;
for my $i (1 .. 60_000) {
    $h{"key$i"} = [ $i, "v" x ($i % 61), { n => $i * 3 } ];
}
delete $h{"key$_"} for grep { $_ % 3 == 0 } 1 .. 60_000;
my $sum = 0;
$sum += $_->[0] + $_->[2]{n} for values %h;
print "hash ", scalar(keys %h), " $sum\n";

my @words = map { sprintf("w%05d-%s", ($_ * 7919) % 100_000, "x" x ($_ % 13)) } 1 .. 40_000;
my @sorted = sort @words;
print "sort $sorted[0] $sorted[-1] ", scalar(@sorted), "\n";

my $text = join " ", @words[0 .. 20_000];
my $count = () = $text =~ /w0\d{3}7-x{3,}/g;
(my $copy = $text) =~ s/(w\d+)-(x*)/$2$1/g;
print "regex $count ", length($copy), "\n";

my $packed = pack("N*", 1 .. 50_000);
my @back = unpack("N*", $packed);
my $ps = 0;
$ps += $_ for @back;
print "pack ", length($packed), " $ps\n";

my $s = "";
$s .= chr(65 + $_ % 26) for 1 .. 1_000_000;
print "concat ", length($s), " ", substr($s, 500_000, 10), "\n";

if ($Config{useithreads}) {
    require threads;
    my @t = map {
        my $id = $_;
        threads->create(sub {
            my %local;
            $local{$_ % 5000} .= "t$id-$_;" for 1 .. 30_000;
            my $total = 0;
            $total += length($_) for values %local;
            return $total;
        });
    } 1 .. 4;
    my @r = map { $_->join } @t;
    print "threads @r\n";
} else {
    print "threads none\n";
}
EOF

perl work.pl >want.out 2>want.err || { echo "Bail out! the workload fails without slabkit"; show want.err; exit 1; }
LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 perl work.pl >got.out 2>got.err
rc=$?
ok $rc "perl with hashes, sorts, regexes, pack, concatenation and 4 ithreads exits 0 under slabkit"
[ $rc = 0 ] || show got.err
cmp -s want.out got.out
rc=$?
ok $rc "its output is byte-for-byte the same as without slabkit"
[ $rc = 0 ] || { show want.out; echo "#   got:"; show got.out; }
served got.err
ok $? "slabkit served perl (slabinfo at exit shows kmalloc objects)"

# perl -e with a large one-off allocation and its release.
LD_PRELOAD=$LIB timeout 60 perl -e 'my $x = "a" x (200 * 1024 * 1024); print length($x), "\n"; undef $x; my @a = (1) x 1_000_000; print scalar(@a), "\n"' >big.out 2>big.err
[ "$(tr '\n' ' ' <big.out)" = "209715200 1000000 " ]
ok $? "perl allocates and frees a 200 MiB string and a million-element array under slabkit"
