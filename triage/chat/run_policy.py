"""What `/run` may execute: the programs, and for each one every option and operand it may take.

An allow-list, not a deny-list: a program not in PROGRAMS, an option not in its spec or one
operand too many is refused. Options are matched whole, as spelled here: GNU getopt and argparse
take an unambiguous prefix (`sort --out=F` is `--output`), so a prefix is refused like any other
unknown option. A spec's short options are in getopt's notation ("k:" takes a value); long ones
are "--name" (a flag), "--name=" (takes a value, inline or the next word) and "--name[=]" (an
optional value, inline only). Left out on purpose, among others: sort -o/-T/--compress-program/
--files0-from, uniq's OUTPUT operand, file -C/-p/-m/-f, grep -r/-d/-f, du -X, df --sync, dmesg -C/-c/-F,
findmnt -F/--poll, hostname NAME/-F/-b, sha256sum -c (reads the files a list names).

Operands are META (any path: only its metadata is read), CONTENT (a file whose bytes are read:
it must be in the checkpoint, the ds_config, or /sys/fs/cgroup; triage.chat.readonly checks
that) or WORDS (not paths: a user name, a search query).
"""

from __future__ import annotations

from dataclasses import dataclass

META, CONTENT, WORDS = "meta", "content", "words"


@dataclass(frozen=True)
class Spec:
    short: str = ""
    long: str = ""
    operands: str = META
    max_operands: int | None = None
    more: str = ""  # what one operand more would do
    digits: bool = False  # `head -20`, `grep -3`: a number as an option
    pattern_first: bool = False  # grep: the first operand is the pattern unless -e gives it

    def options(self) -> dict[str, str]:
        """Option -> "flag", "value" or "optional" (a value only as `--name=value`)."""
        out = {}
        for i, letter in enumerate(self.short):
            if letter != ":":
                out["-" + letter] = "value" if self.short[i + 1:i + 2] == ":" else "flag"
        for name in self.long.split():
            kind = "optional" if name.endswith("[=]") else "value" if name.endswith("=") else "flag"
            out[name.split("[")[0].rstrip("=")] = kind
        return out


HELP = " --help --version"
PROGRAMS: dict[str, Spec] = {
    "ls": Spec("aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxX1ZI:T:w:",
               "--all --almost-all --author --escape --block-size= --ignore-backups --color[=] --directory "
               "--dired --classify[=] --file-type --format= --full-time --group-directories-first --no-group "
               "--human-readable --si --dereference-command-line --dereference-command-line-symlink-to-dir "
               "--hide= --hyperlink[=] --indicator-style= --inode --ignore= --kibibytes --dereference --literal "
               "--numeric-uid-gid --hide-control-chars --show-control-chars --quote-name --quoting-style= "
               "--reverse --recursive --size --sort= --time= --time-style= --tabsize= --width= --context --zero"
               + HELP),
    "stat": Spec("LftZc:", "--dereference --file-system --cached= --format= --printf= --terse" + HELP),
    "namei": Spec("xmolnvhV", "--mountpoints --modes --owners --long --nosymlinks --vertical" + HELP),
    "findmnt": Spec("smkAabCcDeflJnPRruUvyxit:T:M:S:O:o:d:",
                    "--fstab --mtab --kernel --all --ascii --bytes --nocanonicalize --canonicalize --df "
                    "--evaluate --first-only --invert --json --list --noheadings --pairs --submounts --raw "
                    "--notruncate --nofsroot --shell --verify --verbose --real --pseudo --shadowed --tree "
                    "--output-all --vfs-all --types= --target= --mountpoint= --source= --options= --output= "
                    "--direction=" + HELP, max_operands=2),
    "du": Spec("0abchHklLmPsSxDd:t:B:",
               "--null --all --apparent-size --block-size= --bytes --total --max-depth= --human-readable "
               "--inodes --dereference-args --count-links --dereference --no-dereference --separate-dirs --si "
               "--summarize --threshold= --time[=] --time-style= --exclude= --one-file-system" + HELP),
    "df": Spec("ahHiklPTvB:t:x:",
               "--all --block-size= --human-readable --si --inodes --local --no-sync --output[=] --portability "
               "--total --type= --print-type --exclude-type=" + HELP),
    "readlink": Spec("efmnqsvz", "--canonicalize --canonicalize-existing --canonicalize-missing --no-newline "
                                 "--quiet --silent --verbose --zero" + HELP),
    "realpath": Spec("eLmPqsz", "--canonicalize-existing --canonicalize-missing --logical --physical --quiet "
                                "--relative-to= --relative-base= --no-symlinks --strip --zero" + HELP),
    "cat": Spec("AbeEnstTuv", "--show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs "
                              "--show-nonprinting" + HELP, CONTENT),
    "head": Spec("qvzc:n:", "--bytes= --lines= --quiet --silent --verbose --zero-terminated" + HELP, CONTENT,
                 digits=True),
    "tail": Spec("fFqvzc:n:s:", "--bytes= --follow[=] --lines= --max-unchanged-stats= --pid= --quiet --silent "
                                "--retry --sleep-interval= --verbose --zero-terminated" + HELP, CONTENT, digits=True),
    "grep": Spec("EFGPiywxvcLlnobHhqsaITUzZVe:m:A:B:C:",
                 "--extended-regexp --fixed-strings --basic-regexp --perl-regexp --regexp= --ignore-case "
                 "--no-ignore-case --word-regexp --line-regexp --no-messages --invert-match --max-count= "
                 "--byte-offset --line-number --line-buffered --with-filename --no-filename --label= "
                 "--only-matching --quiet --silent --binary-files= --text --count --files-without-match "
                 "--files-with-matches --null --null-data --initial-tab --binary --color[=] --colour[=] "
                 "--after-context= --before-context= --context= --include= --exclude= --exclude-dir=" + HELP,
                 CONTENT, digits=True, pattern_first=True),
    "wc": Spec("clmwL", "--bytes --chars --lines --words --max-line-length --total=" + HELP, CONTENT),
    "od": Spec("bcdfilosvxA:j:N:S:t:", "--address-radix= --endian= --skip-bytes= --read-bytes= --strings[=] "
                                       "--format= --output-duplicates --width[=] --traditional" + HELP, CONTENT),
    "sha256sum": Spec("btz", "--binary --text --tag --zero" + HELP, CONTENT),
    "md5sum": Spec("btz", "--binary --text --tag --zero" + HELP, CONTENT),
    "file": Spec("bcEhiIkLlNnrs0vF:e:P:",
                 "--brief --checking-printout --exclude= --exclude-quiet= --extension --mime --mime-type "
                 "--mime-encoding --keep-going --list --dereference --no-dereference --no-buffer --no-pad "
                 "--print0 --raw --special-files --separator= --parameter= --apple" + HELP, CONTENT),
    "sort": Spec("bdfgiMhnRrVcCmsuzk:t:S:",
                 "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
                 "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort --reverse "
                 "--version-sort --check[=] --merge --stable --unique --zero-terminated --key= --field-separator= "
                 "--buffer-size= --sort= --batch-size= --parallel= --debug" + HELP, CONTENT),
    "uniq": Spec("cdDiuzf:s:w:", "--count --repeated --all-repeated[=] --ignore-case --unique --zero-terminated "
                                 "--skip-fields= --skip-chars= --check-chars= --group[=]" + HELP, CONTENT,
                 max_operands=1, more="uniq writes to its second operand"),
    "id": Spec("agGnruzZ", "--context --group --groups --name --real --user --zero" + HELP, WORDS, max_operands=1),
    "whoami": Spec("", HELP.strip(), WORDS, max_operands=0),
    "nproc": Spec("", "--all --ignore=" + HELP, WORDS, max_operands=0),
    "uname": Spec("asnrvmpio", "--all --kernel-name --nodename --kernel-release --kernel-version --machine "
                               "--processor --hardware-platform --operating-system" + HELP, WORDS, max_operands=0),
    "hostname": Spec("sfdiIAaynV", "--short --fqdn --long --domain --ip-address --all-ip-addresses --all-fqdns "
                                   "--alias --yp --nis" + HELP, WORDS, max_operands=0,
                     more="hostname NAME sets the host name"),
    "free": Spec("bkmghltvwVs:c:", "--bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi --tebi --pebi "
                                   "--human --si --lohi --total --committed --wide --seconds= --count=" + HELP,
                 WORDS, max_operands=0),
    "dmesg": Spec("TkxtdePruHl:f:", "--ctime --kernel --decode --notime --show-delta --reltime --nopager --raw "
                                    "--userspace --human --level= --facility= --time-format=" + HELP,
                  WORDS, max_operands=0),
    "nvidia-smi": Spec("Lq", "--list-gpus --query", WORDS, max_operands=0),
}

# find: its expression is checked word by word (the starting points are META operands).
FIND_LEADING = {"-H", "-L", "-P"}
FIND_VALUED = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname",
               "-regex", "-iregex", "-regextype", "-type", "-xtype", "-size", "-maxdepth", "-mindepth",
               "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-newer", "-perm", "-user", "-group",
               "-uid", "-gid", "-links", "-inum", "-samefile", "-used", "-fstype", "-printf"}
FIND_FLAGS = {"-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-readable", "-writable",
              "-executable", "-nouser", "-nogroup", "-xdev", "-mount", "-depth", "-follow", "-noleaf", "-daystart",
              "-not", "!", "-a", "-and", "-o", "-or", ",", "(", ")", "-ignore_readdir_race",
              "-noignore_readdir_race", "-help", "--help", "-version", "--version"}
FIND_ACTS = {"-delete": "deletes files", "-exec": "runs a program", "-execdir": "runs a program",
             "-ok": "runs a program", "-okdir": "runs a program", "-fprint": "writes a file",
             "-fprint0": "writes a file", "-fprintf": "writes a file", "-fls": "writes a file",
             "-files0-from": "reads the starting points from a file"}

# The ds-triage subcommands that only read, with their options (--reproduce, --trust-checkpoint,
# --model-factory, --as-user, --junit and repair are left out: they load, import, or write).
_DS_OUT = " --json --format= --color= --quiet --verbose --help"
_DS_TARGET = (" --config= --world-size= --stage= --model= --optimizer= --param-groups= --load-dir= --deep "
              "--host-memory= --ranks-per-node= --progress")
_DS_RULES = " --rules= --extra-rules= --docs-url="
DS_TRIAGE: dict[str, Spec] = {
    "probe": Spec("qvh", _DS_OUT + _DS_TARGET, max_operands=1),
    "triage": Spec("qvh", _DS_OUT + _DS_TARGET + _DS_RULES + " --log= --ckpt=", max_operands=0),
    "classify": Spec("qvh", _DS_OUT + _DS_RULES + " --ckpt= --tag= --config="),
    "runbook": Spec("qvh", _DS_OUT + _DS_RULES + " --list", WORDS),
    "verify": Spec("qvh", _DS_OUT + " --manifest= --sizes-only --deep --load-dir= --model= --progress",
                   max_operands=1),
    "inspect": Spec("qvh", " --config --optimizer --shapes --ranks --color= --quiet --verbose --help", CONTENT,
                    max_operands=1),
}
SAFE_PICKLE = Spec("h", "--config --optimizer --help", CONTENT, max_operands=1)  # python -m triage.probe.safe_pickle

# Why a program is not on the list, for the ones people paste (any other: not a read-only program).
_INTERPRETER = "an interpreter runs whatever code it is given (the rules' own checks run by number: /run N)"
_LAUNCHER = "it runs another program"
_WRITER = "it writes, moves or deletes files"
_BUILTIN = "it is a shell built-in, and the chat runs no shell: run it in the job's shell"
REFUSED = {
    **dict.fromkeys("python python2 python3 pypy pypy3 ipython perl ruby node nodejs php lua R Rscript julia "
                    "tclsh awk gawk mawk nawk sed sh bash dash zsh ksh csh tcsh fish busybox gdb make vi vim "
                    "nano emacs less more man".split(), _INTERPRETER),
    **dict.fromkeys("env xargs nice nohup timeout stdbuf sudo su doas time watch strace ltrace chroot setpriv "
                    "runuser unshare nsenter flock parallel torchrun deepspeed accelerate pip pip3 git docker ssh "
                    "scp curl wget".split(), _LAUNCHER),
    **dict.fromkeys("tee dd cp mv rm ln touch mkdir rmdir chmod chown chgrp truncate install shred rsync tar zip "
                    "unzip gzip gunzip patch split csplit mktemp mkfifo mknod".split(), _WRITER),
    **dict.fromkeys("ulimit cd export set unset alias umask source . exec eval command builtin".split(), _BUILTIN),
}


def refused_program(name: str) -> str:
    """Why `name` does not run: not on the list, and what it would do when it is a known one."""
    kind = REFUSED.get(name) or REFUSED.get(name.rstrip("0123456789.")) or ""  # python3.11, perl5.36
    return f"`{name}` is not on the chat's list of read-only programs" + (f": {kind}" if kind else
                                                                           " (ls, stat, cat, grep, find, ...)")


def check_options(program: str, spec: Spec, args: list[str]) -> list[int] | str:
    """The indices in `args` of the operands, or why an option is refused (one line)."""
    known, operands, pattern_given = spec.options(), [], False
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            operands += range(i + 1, len(args))
            break
        if word == "-" or not word.startswith("-"):
            operands.append(i)
        elif word.startswith("--"):
            name, eq, _ = word.partition("=")
            kind = known.get(name)
            if kind is None:
                return _not_allowed(program, name)
            if kind == "flag" and eq:
                return f"{program} {name} takes no value"
            i += kind == "value" and not eq
            pattern_given |= name == "--regexp"
        elif not (spec.digits and word[1:].isdigit()):
            for j, letter in enumerate(word[1:], 1):
                kind = known.get("-" + letter) or ("flag" if spec.digits and letter.isdigit() else None)
                if kind is None:
                    return _not_allowed(program, "-" + letter)
                if kind == "value":
                    pattern_given |= letter == "e"
                    i += j == len(word) - 1  # `-k 2`: the value is the next word; `-k2`: the rest of this one
                    break
        i += 1
    if spec.pattern_first and not pattern_given:
        operands = operands[1:]  # grep PATTERN FILE...: the pattern is not a file
    limit = spec.max_operands
    if limit is not None and len(operands) > limit:
        return f"{spec.more}; the chat runs read-only commands only" if spec.more else \
            f"{program} takes {'no' if limit == 0 else f'at most {limit}'} operand{'s' * (limit != 1)} here"
    return operands


def _not_allowed(program: str, option: str) -> str:
    return f"{program} {option} is not one of the read-only options the chat allows for {program}"


def check_find(args: list[str]) -> list[int] | str:
    """find's starting points (indices in `args`), or why its expression is refused."""
    i = 0
    while i < len(args) and args[i] in FIND_LEADING:
        i += 1
    starts = []
    while i < len(args) and not (args[i].startswith("-") or args[i] in ("(", "!")):
        starts.append(i)
        i += 1
    while i < len(args):
        word = args[i]
        if word in FIND_ACTS:
            return f"find {word} {FIND_ACTS[word]}; the chat runs read-only commands only"
        if word in FIND_VALUED:
            i += 1
        elif word not in FIND_FLAGS:
            return f"find {word} is not one of the read-only find predicates the chat allows"
        i += 1
    return starts
