"""Style cases for FSDP014: code written in styles the fixtures do not use."""

CASES = {
    "fsdp014-disabled-once-at-start": """
        model.set_requires_gradient_sync(False)  # expect: FSDP014
        for batch in loader:
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
    """,
    "fsdp014-good-reenabled-before-last-backward": """
        for step, batch in enumerate(loader):
            last = (step + 1) % accumulation == 0
            if not last:
                model.set_requires_gradient_sync(False)
            else:
                model.set_requires_gradient_sync(True)
            model(batch).sum().backward()
            if last:
                optimizer.step()
    """,
    "fsdp014-reenabled-only-after-the-step": """
        def train(model, optimizer, loader, accum):
            for i, batch in enumerate(loader):
                model.set_requires_gradient_sync(False)  # expect: FSDP014
                model(batch).mean().backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    model.set_requires_gradient_sync(True)
    """,
    "fsdp014-good-profiler-step-while-disabled": """
        def train(model, optimizer, micro, prof):
            model.set_requires_gradient_sync(False)
            for mb in micro[:-1]:
                model(mb).mean().backward()
                prof.step()
            model.set_requires_gradient_sync(True)
            model(micro[-1]).mean().backward()
            optimizer.step()
    """,
    "fsdp014-good-no-step-in-file": """
        def freeze_sync(model):
            model.set_requires_gradient_sync(False)
    """,
}
