"""The quoting context of each `${{...}}` reference of a command, and how a value is written for
it (tests/reliability/test_substituted_values.py runs what this writes through bash)."""

from __future__ import annotations

import pytest

from distrun.spec.command_template import _EXPR
from distrun.spec.shell_context import Context, UnsafePlacement, contexts, escape_value


def _contexts(command: str) -> list[Context]:
    return contexts(command, [m.span() for m in _EXPR.finditer(command)])


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("train ${{inputs.a}} --b=${{inputs.b}}", [Context.BARE, Context.BARE]),
        ("echo \"got ${{inputs.a}}\" 'and ${{inputs.b}}'", [Context.DOUBLE, Context.SINGLE]),
        ('echo "it\'s ${{inputs.a}}" ${{inputs.b}}', [Context.DOUBLE, Context.BARE]),
        ("echo 'say \"${{inputs.a}}' ${{inputs.b}}", [Context.SINGLE, Context.BARE]),
        ('echo \\"${{inputs.a}} "\\"${{inputs.b}}"', [Context.BARE, Context.DOUBLE]),
        ("echo $'a\\'${{inputs.a}}' ${{inputs.b}}", [Context.ANSI_C, Context.BARE]),
        ('echo "$(cat ${{inputs.a}}) ${{inputs.b}}"', [Context.BARE, Context.DOUBLE]),
        ('echo "$(echo "in ${{inputs.a}}")"', [Context.DOUBLE]),
        ("echo $(f (x) ${{inputs.a}}) ${{inputs.b}}", [Context.BARE, Context.BARE]),
        ("echo `cat ${{inputs.a}}` ${{inputs.b}}", [Context.BACKTICK, Context.BARE]),
        ('echo "${X:-${{inputs.a}}}" ${{inputs.b}}', [Context.PARAMETER, Context.BARE]),
        ("echo $(( ${{inputs.a}} + 1 )) ${{inputs.b}}", [Context.ARITHMETIC, Context.BARE]),
        ("echo a # note ${{inputs.a}}\necho ${{inputs.b}}", [Context.COMMENT, Context.BARE]),
        ("echo a#b ${{inputs.a}}", [Context.BARE]),
        ("cat <<EOF\n${{inputs.a}}\nEOF\necho ${{inputs.b}}", [Context.HEREDOC, Context.BARE]),
        ("cat <<'EOF' && x\n\"${{inputs.a}}\"\nEOF\n${{inputs.b}}", [Context.QUOTED_HEREDOC, Context.BARE]),
        ("cat <<-\\END\n\t${{inputs.a}}\n\tEND\n${{inputs.b}}", [Context.QUOTED_HEREDOC, Context.BARE]),
        ("cat <<<${{inputs.a}}", [Context.BARE]),
        ('echo "a\nb ${{inputs.a}}"', [Context.DOUBLE]),
    ],
)
def test_each_reference_is_read_in_the_context_bash_reads_it_in(command: str, expected: list[Context]) -> None:
    assert _contexts(command) == expected


def test_the_characters_of_a_reference_are_never_read_as_quotes() -> None:
    # `${{` would open a ${...} expansion if the scanner read the reference's own characters.
    assert _contexts("a ${{inputs.a}} ${{inputs.b}} 'c'") == [Context.BARE, Context.BARE]


@pytest.mark.parametrize(
    ("context", "value", "written"),
    [
        (Context.BARE, "a b", "'a b'"),
        (Context.BARE, "plain/path-1.0", "plain/path-1.0"),
        (Context.DOUBLE, '$(x) `y` "z" \\', '\\$(x) \\`y\\` \\"z\\" \\\\'),
        (Context.SINGLE, "it's", "it'\"'\"'s"),
        (Context.ANSI_C, "it's \\n", "it\\'s \\\\n"),
        (Context.HEREDOC, '$x `y` "z"', '\\$x \\`y\\` "z"'),
        (Context.QUOTED_HEREDOC, "$x `y`", "$x `y`"),
        (Context.ARITHMETIC, "42", "42"),
        (Context.COMMENT, "a $(b) 'c", "a $(b) 'c"),
        (Context.ARITHMETIC, "", ""),
    ],
)
def test_a_value_is_written_for_its_context(context: Context, value: str, written: str) -> None:
    assert escape_value(value, context) == written


@pytest.mark.parametrize(
    ("context", "value"),
    [
        (Context.ARITHMETIC, "a[$(id)]"),
        (Context.BACKTICK, "a b"),
        (Context.PARAMETER, "}"),
        (Context.COMMENT, "x\nid"),
        (Context.HEREDOC, "x\nEOF\nid"),
        (Context.QUOTED_HEREDOC, "x\nEOF"),
        (Context.ARITHMETIC, "1 + 1"),
    ],
)
def test_a_value_no_writing_makes_safe_is_refused(context: Context, value: str) -> None:
    with pytest.raises(UnsafePlacement) as refused:
        escape_value(value, context)
    assert refused.value.context == context
