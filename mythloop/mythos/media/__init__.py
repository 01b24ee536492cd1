"""From scene videos to a film people can watch: ffmpeg steps, subtitles, speech.

avmux.py (probe, stitch, hold, mux, poster), subtitles.py (cues, SRT/VTT), tts.py (speech
engines), filmmedia.py (`finish_film`: narration, voice and captions of a stitched film).
Never imports mythloop.mythos.sandbox itself (an import contract).
"""
