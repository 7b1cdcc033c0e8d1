"""`ds-triage chat`: an interactive triage session, a thin prompt_toolkit shell over a pure core.

    session.py       the incident: the pasted log, its classification, the facts of the load,
                     the probe verdict, the commands run
    questions.py     which facts the open hypotheses need, and checking the answers
    conversation.py  `Conversation.handle(message) -> Reply`: the whole dialogue, no terminal I/O
    commands.py      the slash commands, registered with `@command`; /help is built from them
    replies.py       the text of the answers (ranked causes, verdict, evidence, fix)
    readonly.py      /run: what a command may touch, its argv, and running it (no shell)
    run_policy.py    /run's allow-list: the programs, each one's options and operands
    shell_words.py   a command's words as sh would split them; what only a shell acts on refused
    repair.py        /repair: `ds-triage repair`'s dry run, then --apply after a yes naming its writes
    lookup.py        /runbook: the page `ds-triage runbook` prints
    reply.py         what a message gets back (Reply) and what the conversation waits for (Ask)
    export.py        the Markdown incident report (/export)
    intent.py        a typed line's intent: a command word without its slash, a question
    pasted.py        pasted command output read as evidence, and the deciding question
    app.py           the prompt_toolkit prompt: paste, key bindings, completion, history
    pager.py         replies on a terminal: wrapped at its width, paged when taller than it
    wrap.py          wrapping between words (a long path broken after a `/`)
    plain.py         no terminal (stdin piped): the whole input as one conversation

Only app.py and pager.py import prompt_toolkit; nothing here imports torch or deepspeed.
"""
