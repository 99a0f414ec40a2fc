// The workspace's only script: the Copy buttons next to a key or secret shown once.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button.copy");
  if (!button) return;
  var text = document.getElementById(button.dataset.copy).textContent;
  var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 2000); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, function () { select(button); });
  } else {
    select(button);
  }
});

function select(button) {
  var range = document.createRange();
  range.selectNodeContents(document.getElementById(button.dataset.copy));
  var selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  try { document.execCommand("copy"); button.textContent = "Copied"; } catch (e) { button.textContent = "Press Ctrl+C"; }
}
