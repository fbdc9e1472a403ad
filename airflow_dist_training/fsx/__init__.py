"""FSx for Lustre staging logic that needs no I/O (standard library and ``errors`` only), so the
rules are testable without AWS: the hook (``hooks/fsx.py``) fetches the facts, operators compose
the two.
"""
